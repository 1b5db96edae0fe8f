"""A run whose own directory stopped taking writes (its filesystem full, remounted read-only, over quota): the one
line that says so, whatever part of gnnq hit it first (a rank's metrics row, the launcher's log, a hand-off file),
and the record written where it still can be (the room kept for it, else elsewhere, said where)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from gnnq.contract import INTERNAL_DIR, RECORD_FILE
from gnnq.errors import GnnqError, describe_os_error
from gnnq.track.record import write_record
from gnnq.track.reserve import release_space

DISK_ERRNOS = {errno.ENOSPC, errno.EROFS, errno.EDQUOT}


def unwritable(run_dir: Path) -> OSError | None:
    """The error a one-byte write in ``run_dir`` gets now (None: it can be written)."""
    probe = Path(run_dir) / INTERNAL_DIR / f".probe-{os.getpid()}"
    try:
        with open(probe, "wb") as f:
            f.write(b"\0")
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        if exc.errno in DISK_ERRNOS:
            return exc
        return None
    finally:
        try:
            probe.unlink()
        except OSError:
            pass
    return None


def disk_failure_line(run_dir: Path, exc: BaseException) -> str | None:
    """The failure line when the run's directory no longer takes writes (None: it does; the failure is another)."""
    own = isinstance(exc, OSError) and exc.errno in DISK_ERRNOS and exc.filename
    cause = exc if own else unwritable(run_dir)
    if cause is None:
        return None
    stopped = f"the run's directory {run_dir} stopped taking writes during the run"
    if own:
        return f"cannot write {exc.filename} ({describe_os_error(cause)}): {stopped}; {_checkpoint_state(run_dir)}"
    return f"{stopped} ({describe_os_error(cause)}); {_checkpoint_state(run_dir)}"


def _checkpoint_state(run_dir: Path) -> str:
    from gnnq.train.checkpoint import verify_checkpoint  # here: it imports torch, which the launcher needs only now

    try:
        latest = verify_checkpoint(run_dir)
    except (GnnqError, OSError, ValueError):
        latest = None
    if not latest:
        return "no checkpoint was written (trainer.checkpoint_every)"
    return (
        f"the checkpoint of epoch {latest['epoch']} is intact: free space or make it writable, then "
        f"gnnq resume={run_dir}"
    )


def write_failed_record(run_dir: Path, record: dict) -> Path:
    """``write_record``, where the run's filesystem refused it: again after removing the room kept for it, then in
    ``elsewhere(run_dir)``; returns where it went. OSError when neither takes it."""
    try:
        return write_record(run_dir, record)
    except OSError as exc:
        first = exc
    if first.errno == errno.ENOSPC and release_space(run_dir):
        try:
            return write_record(run_dir, record)
        except OSError:
            pass
    other = elsewhere(run_dir)
    try:
        return write_record(other, record)
    except OSError:
        raise first from None


def elsewhere(run_dir: Path) -> Path:
    """Where a record goes that its run dir refused: ``$XDG_STATE_HOME/gnnq/records/<run dir's name>`` (default
    ``~/.local/state``)."""
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "gnnq" / "records" / Path(run_dir).name


def written_elsewhere(run_dir: Path, path: Path) -> str:
    """The words for a record written outside its run dir ("" when it is in it)."""
    if Path(path).parent == Path(run_dir):
        return ""
    return f"; {Path(run_dir) / RECORD_FILE} could not be written, the record is at {path}"
