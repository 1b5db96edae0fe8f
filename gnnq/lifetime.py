"""Children that die with their parent: Linux's parent-death signal (PR_SET_PDEATHSIG) through libc's prctl."""

from __future__ import annotations

import signal
import sys

PR_SET_PDEATHSIG = 1


def libc_prctl():
    """libc's prctl; None off Linux or where it cannot be loaded. Load it before a fork: a forked child must not
    load libraries."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(prctl) -> bool:
    """Ask Linux to SIGKILL this process when the thread that started it ends, through ``prctl`` (libc_prctl's,
    loaded before any fork); False where it cannot be asked (``prctl`` None)."""
    if prctl is None:
        return False
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    return True
