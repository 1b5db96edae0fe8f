"""This process's resident memory, now and at its peak (MiB), as Linux's /proc counts it."""

from __future__ import annotations

import os
import resource
from pathlib import Path


def rss_mib() -> float:
    """This process's resident memory (MiB); 0 where /proc does not say."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def proc_kib(path: str, key: str) -> int | None:
    """The ``key:  <n> kB`` line of a /proc file (/proc/meminfo, /proc/self/status) as n; None where it is not."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def peak_rss_mib() -> float:
    """This process's own peak resident memory (MiB): VmHWM. Not getrusage's ru_maxrss, which Linux carries over
    exec from the process that forked it (a rank started by torchrun, or a script by a big pytest process,
    would report its parent's size when that was larger); ru_maxrss only where /proc does not say."""
    hwm = proc_kib("/proc/self/status", "VmHWM")
    return hwm / 1024.0 if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
