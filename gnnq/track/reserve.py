"""Room for the run record, set aside when the run dir is claimed: ``.gnnq/record.reserve``, a file of
``RESERVE_BYTES``. A filesystem that fills up during the run (other jobs, W&B, logs) still takes the failed record:
the reserve is removed first, then the record written (gnnq.launch.job). A filesystem too small for it refuses the
run before anything else is written there."""

from __future__ import annotations

import os
from pathlib import Path

from gnnq.contract import INTERNAL_DIR

RESERVE_FILE = "record.reserve"  # under INTERNAL_DIR
RESERVE_BYTES = 64 * 1024  # a failed record is a few KiB; a finished one with every summary up to ~30 KiB


def reserve_path(run_dir: Path) -> Path:
    return Path(run_dir) / INTERNAL_DIR / RESERVE_FILE


def reserve_space(run_dir: Path) -> None:
    """Write the reserve (real blocks, synced); OSError (ENOSPC, EDQUOT) when the filesystem cannot hold it, with
    nothing of it left."""
    path = reserve_path(run_dir)
    try:
        with open(path, "wb") as f:
            f.write(b"\0" * RESERVE_BYTES)
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        path.unlink(missing_ok=True)
        raise


def release_space(run_dir: Path) -> bool:
    """Remove the reserve; True when there was one to remove."""
    try:
        reserve_path(run_dir).unlink()
    except OSError:  # none, or a filesystem that became read-only
        return False
    return True
