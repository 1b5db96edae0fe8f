"""The launcher's stop signals: SIGINT (Ctrl-C), SIGTERM (a scheduler's stop) and SIGHUP (a closed terminal or a
dropped SSH session) each stop the run: all ranks stopped, a failed record, exit 128 + the signal's number.

The first one raises KeyboardInterrupt (its name as the message) wherever the launcher is; the ones that follow
while it stops (a second Ctrl-C, a scheduler's repeated SIGTERM) are noted and change nothing, so that the stop
under way (ranks stopped, the record written) is never cut short and the exit status stays 128 + the first
signal's number. ``received`` tells code that catches any exception whether a signal caused it (a C++ extension,
e.g. METIS, turns the KeyboardInterrupt raised inside it into its own RuntimeError).
"""

from __future__ import annotations

import signal

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[str] = []


def install() -> None:
    """Handle the stop signals (explicitly: a background launch may inherit SIGINT as ignored)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _handler)


def _handler(signum, frame) -> None:
    name = signal.Signals(signum).name
    _received.append(name)
    if len(_received) == 1:
        raise KeyboardInterrupt(name)


def received() -> str | None:
    """The name of the first stop signal this process got (None: none)."""
    return _received[0] if _received else None


def exit_code(name: str) -> int:
    """128 + the signal's number: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP."""
    return 128 + getattr(signal.Signals, name, signal.SIGINT).value
