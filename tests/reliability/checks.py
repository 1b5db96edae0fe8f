"""The global checks after every case: records lost, orphan processes, secrets written."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

MAX_SCAN_BYTES = 256 * 2**20  # larger files (none in these cases) are not read


def records(root: Path) -> dict[str, str]:
    """sha256 of every record.json below ``root`` (path -> digest)."""
    out = {}
    for path in sorted(root.rglob("record.json")):
        try:
            out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[str(path)] = "unreadable"
    return out


def lost_records(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Records that existed before and are now missing or changed."""
    return [p for p, digest in before.items() if after.get(p) != digest]


def files_holding(root: Path, secret: str) -> list[str]:
    """Every file below ``root`` whose bytes hold ``secret`` (links and special files are not followed)."""
    needle, found = secret.encode(), []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            try:
                if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_SCAN_BYTES:
                    continue
                if needle in path.read_bytes():
                    found.append(str(path))
            except OSError:
                continue
    return found
