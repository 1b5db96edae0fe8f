"""What gnnq prints: never fatal, and kept in the job's log.

``install()`` replaces ``sys.stdout`` and ``sys.stderr`` with streams that survive a reader that went away
(``gnnq ... | head -1``): on BrokenPipeError they point the descriptor at /dev/null and go on, so the run
finishes and leaves its record. ``log_to(path)`` also copies every line written during a job into
``path`` (Hydra's per-job ``cli.log``); a terminal's in-place progress bar (lines starting with ``\\r``)
stays out of it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator, TextIO


class ConsoleStream:
    def __init__(self, stream: TextIO):
        self.stream = stream
        self.broken = False
        self.copies: list[TextIO] = []

    def write(self, text: str) -> int:
        for copy in self.copies:
            if not text.startswith("\r"):
                copy.write(text)
        if not self.broken:
            try:
                self.stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        for copy in self.copies:
            copy.flush()
        if not self.broken:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        """The reader closed the pipe: later writes (ours, the exit's flush, child processes') go to /dev/null."""
        self.broken = True
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.stream.fileno())
        finally:
            os.close(devnull)

    def isatty(self) -> bool:
        return not self.broken and self.stream.isatty()

    def __getattr__(self, name: str):  # encoding, fileno, ...: the real stream's
        return getattr(self.stream, name)


def install() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` (once)."""
    for name in ("stdout", "stderr"):
        if not isinstance(getattr(sys, name), ConsoleStream):
            setattr(sys, name, ConsoleStream(getattr(sys, name)))


@contextlib.contextmanager
def log_to(path: Path) -> Iterator[None]:
    """Copy what gnnq prints meanwhile into ``path`` (appended: Hydra's own log lines are there too)."""
    install()
    streams = [s for s in (sys.stdout, sys.stderr) if isinstance(s, ConsoleStream)]
    with open(path, "a", buffering=1) as log:
        for s in streams:
            s.copies.append(log)
        try:
            yield
        finally:
            for s in streams:
                s.copies.remove(log)


def say(msg: str) -> None:
    """One line of the launcher's, marked as gnnq's."""
    print(f"[gnnq] {msg}", flush=True)
