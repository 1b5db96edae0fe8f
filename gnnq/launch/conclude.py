"""The last step of a run: its record.json written (also when it failed or was interrupted), then W&B closed with
the same numbers."""

from __future__ import annotations

import errno
import sys
import time
import traceback
from pathlib import Path

from gnnq.contract import RECORD_FILE
from gnnq.errors import GnnqError, LaunchError, describe_os_error
from gnnq.launch.disk_failure import DISK_ERRNOS, disk_failure_line, write_failed_record, written_elsewhere
from gnnq.track.record import build_record
from gnnq.track.wandb_logger import NullLogger, close_logger

DISK_ERRNO_NAMES = [errno.errorcode[e] for e in DISK_ERRNOS]


def failure_line(exc: Exception, run_dir: Path) -> str:
    """A GnnqError's own line; a run dir that stopped taking writes (full, read-only) named with its errno
    (gnnq.launch.disk_failure); any other exception (a bug) with its traceback kept in logs/launcher.log."""
    if isinstance(exc, GnnqError) and any(f"({name})" in str(exc) for name in DISK_ERRNO_NAMES):
        return str(exc)  # it names the disk's problem itself (a checkpoint that did not fit)
    disk = disk_failure_line(run_dir, exc)
    if disk:
        return disk
    if isinstance(exc, GnnqError):
        return str(exc)
    try:
        (run_dir / "logs").mkdir(exist_ok=True)
        (run_dir / "logs" / "launcher.log").write_text(traceback.format_exc())
    except OSError:
        return f"{type(exc).__name__}: {exc}"
    return f"{type(exc).__name__}: {exc} (traceback: {run_dir}/logs/launcher.log)"


def interrupted(run_dir: Path, config: dict, extra: dict, logger, started: float, reason: str) -> None:
    """The failed record of a run a signal stopped (the ranks are stopped by then)."""
    record = build_record(config, "failed", error=f"interrupted ({reason}); all ranks were stopped", extra=extra)
    try:
        conclude(run_dir, record, logger, started)
    except GnnqError as lost:  # the interrupt still decides the exit code (128 + signal)
        print(f"gnnq: error: {lost}", file=sys.stderr, flush=True)


def conclude(run_dir: Path, record: dict, logger: NullLogger, started: float) -> None:
    """Write record.json, then give W&B the same numbers (its summary is the record's)."""
    record["wall_time_s"] = round(time.time() - started, 3)
    try:
        _write_final_record(run_dir, record)
    finally:
        close_logger(logger, record, run_dir)


def _write_final_record(run_dir: Path, record: dict) -> None:
    """write_record; a filesystem that refuses it (full, read-only by now) gets it after the room kept for it is
    freed, else it goes elsewhere (gnnq.launch.disk_failure); either way one LaunchError line says where it is."""
    what = f"the run {'failed: ' + record['error'] if record['error'] else 'finished'}"
    try:
        path = write_failed_record(run_dir, record)
    except OSError as exc:
        raise LaunchError(f"cannot write {run_dir / RECORD_FILE} ({describe_os_error(exc)}); {what}") from None
    if path.parent != run_dir:
        raise LaunchError(f"{what}{written_elsewhere(run_dir, path)}")
