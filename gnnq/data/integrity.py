"""Content checksums of cache files, and the one-line warning printed when a cache entry is rebuilt."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from gnnq.errors import CacheError


def file_sha256(path: Path) -> str:
    """The sha256 of the file's bytes; CacheError naming the file when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as exc:
        raise CacheError(f"{path} is unreadable ({exc.strerror or type(exc).__name__})") from None


def check_sha256(path: Path, expected: str, recorded_in: Path) -> None:
    """CacheError naming ``path`` unless its bytes hash to ``expected`` (recorded in ``recorded_in``)."""
    actual = file_sha256(path)
    if actual != expected:
        raise CacheError(
            f"{path} is corrupt: its sha256 {actual[:16]}... differs from {str(expected)[:16]}... in {recorded_in}"
        )


def warn(message: str) -> None:
    print(f"[gnnq] warning: {message}", file=sys.stderr, flush=True)
