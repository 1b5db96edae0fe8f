"""gnnq-report's progress on long work (thousands of runs, many plots): ``gnnq-report: reading records 4,000/10,000
(2 s)`` lines on stderr, at most one every ``EVERY_S`` seconds and only once the work has taken that long, so a short
report prints none."""

from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TypeVar

EVERY_S = 2.0
T = TypeVar("T")


def steps(items: Iterable[T], what: str, total: int | None = None) -> Iterator[T]:
    """``items``, saying how far it got while they take long."""
    total = len(items) if total is None and hasattr(items, "__len__") else total
    start = last = time.monotonic()
    said, i = False, 0
    for i, item in enumerate(items, 1):
        yield item
        now = time.monotonic()
        if now - last >= EVERY_S:
            of = f"/{total:,}" if total else ""
            print(f"gnnq-report: {what} {i:,}{of} ({now - start:.0f} s)", file=sys.stderr, flush=True)
            said, last = True, now
    if said:
        print(f"gnnq-report: {what}: {i:,} done ({time.monotonic() - start:.0f} s)", file=sys.stderr, flush=True)
