"""Where a run writes: a run directory owned by one gnnq at a time, that never silently replaces an earlier run.

* ``check_writable(path, key)``: the place (``runs_root``, ``GNNQ_RUNS``, ``hydra.run.dir``) can hold
  directories; PlaceError names the path otherwise (a file in its place, a read-only filesystem, no permission).
* ``claim_run_dir(run_dir, ...)``: an exclusive ``flock`` on ``<run dir>/.gnnq/lock`` for the rest of this
  process (the lock file holds the owner's pid, so a second gnnq names it), and a refusal of a directory
  that already holds a run unless it is resumed or ``overwrite=true`` says to replace it.

``PlaceCheck`` is the Hydra callback (``hydra.callbacks`` in conf/config.yaml) that does both before Hydra
writes anything into the run or sweep directory (a sweep directory is locked the same way; each point's
directory is claimed by gnnq.launch.job.run_job).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import tempfile
from pathlib import Path

import gnnq.config.published  # noqa: F401 - registers the resolver ${published:...} of the presets (also on Slurm)
import gnnq.launch.job_names  # noqa: F401 - registers the resolver of hydra.sweep.subdir (also on a Slurm node)
from gnnq.contract import (
    CONFIG_FILE,
    ERROR_FILES,
    EXITS_FILE,
    HEARTBEAT_FILES,
    INTERNAL_DIR,
    METRICS_FILE,
    RECORD_FILE,
    RESULT_FILE,
)
from gnnq.errors import GnnqError, describe_os_error
from gnnq.launch.outcome import SWEEP_DIR
from gnnq.track.reserve import release_space, reserve_path, reserve_space

LOCK_FILE = "lock"  # under INTERNAL_DIR
# what an earlier run left that would speak for a new one: rank hand-offs, heartbeats, checkpoints
STALE_HANDOFFS = (ERROR_FILES, HEARTBEAT_FILES, RESULT_FILE, EXITS_FILE)
RUN_FILES = (RECORD_FILE, CONFIG_FILE, METRICS_FILE)

_HELD: dict[Path, int] = {}  # run dirs this process has locked -> the lock file's descriptor (kept open)


class PlaceError(GnnqError):
    """A run directory or its root cannot be used: not writable, in use, or holding another run."""


def check_writable(path: Path, key: str) -> None:
    """PlaceError unless directories can be created at ``path`` (created or not yet); ``key`` is what set it."""
    path = Path(os.path.abspath(os.path.expanduser(path)))
    too_long = _name_too_long(path)
    if too_long:
        raise PlaceError(
            f"{key}: {path} cannot be created (File name too long (ENAMETOOLONG): {too_long}); "
            f"set {key} to a shorter path"
        )
    existing = path
    try:
        while not existing.exists() and existing != existing.parent:
            if existing.is_symlink():  # a dangling link: mkdir would fail on it
                raise PlaceError(f"{key}: {existing} is a broken symbolic link; set {key} to a writable directory")
            existing = existing.parent
    except OSError as exc:  # a path longer than the filesystem takes (ENAMETOOLONG), a loop of links
        raise PlaceError(
            f"{key}: {path} cannot be created ({describe_os_error(exc)}); set {key} to a shorter path"
        ) from None
    if not existing.is_dir():
        raise PlaceError(
            f"{key}: {existing} is a file, not a directory, so {path} cannot be created; "
            f"set {key} to a writable directory"
        )
    try:
        probe = tempfile.mkdtemp(prefix=".gnnq-probe-", dir=existing)
    except OSError as exc:
        raise PlaceError(
            f"{key}: cannot create directories in {existing} ({describe_os_error(exc)}), so {path} "
            f"cannot be created; set {key} to a writable directory"
        ) from None
    os.rmdir(probe)


def claim_run_dir(
    run_dir: Path, key: str = "hydra.run.dir", overwrite: bool = False, resuming: bool = False, record: bool = True
) -> Path:
    """Create ``run_dir`` and hold it for this process; PlaceError (nothing in it changed) when it is not free.

    Free means: no other gnnq holds its lock, and it holds no earlier run (``record.json``,
    ``config.yaml`` or ``metrics.jsonl``) unless ``resuming`` that run or ``overwrite`` is set; then the
    earlier attempt's hand-off files are removed so that they cannot speak for this one. Idempotent
    within a process. With ``record`` (a run's dir, not a sweep's) the room for its record is set aside
    (gnnq.track.reserve)."""
    run_dir = Path(os.path.abspath(os.path.expanduser(run_dir)))
    if run_dir in _HELD:
        return run_dir
    check_writable(run_dir, key)
    made = _missing_dirs(run_dir / INTERNAL_DIR)
    try:
        (run_dir / INTERNAL_DIR).mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / INTERNAL_DIR / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        _remove_made(made)
        raise PlaceError(
            f"{key}: cannot create {run_dir / INTERNAL_DIR / LOCK_FILE} ({describe_os_error(exc)}); "
            f"set {key} to a writable directory"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise PlaceError(
            f"{key}: {run_dir} is in use by another gnnq (pid {holder}); wait for it to end, "
            "or give this run another directory"
        ) from None
    earlier = [name for name in RUN_FILES if (run_dir / name).exists()]
    if earlier and not (resuming or overwrite):
        os.close(fd)
        raise PlaceError(
            f"{key}: {run_dir} already holds a run ({earlier[0]} exists); continue it with "
            f"gnnq resume={run_dir}, choose a new directory, or replace it with overwrite=true"
        )
    writing = run_dir / INTERNAL_DIR / LOCK_FILE
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        if record:
            writing = reserve_path(run_dir)
            reserve_space(run_dir)
    except OSError as exc:  # a full filesystem (ENOSPC), a quota (EDQUOT): nothing of this run is left there
        os.close(fd)
        if made:
            (run_dir / INTERNAL_DIR / LOCK_FILE).unlink(missing_ok=True)
            _remove_made(made)
        raise PlaceError(
            f"{key}: cannot write {writing} ({describe_os_error(exc)}); "
            f"free space there or set {key} to a directory on another filesystem"
        ) from None
    _HELD[run_dir] = fd
    if earlier and overwrite:
        clear_earlier_attempt(run_dir, checkpoints=True)
    return run_dir


def _missing_dirs(path: Path) -> list[Path]:
    """The directories from ``path`` up that do not exist yet (deepest first): what a mkdir -p would create."""
    out = []
    while not path.exists() and path != path.parent:
        out.append(path)
        path = path.parent
    return out


def _remove_made(made: list[Path]) -> None:
    for d in made:  # deepest first; only empty ones
        try:
            d.rmdir()
        except OSError:
            pass


def _name_too_long(path: Path) -> str:
    """Why ``path`` is too long for the filesystem it would be made on (a name over NAME_MAX bytes, the whole over
    PATH_MAX), checked before anything is made; "" when it is not."""
    parent = path
    while not os.path.isdir(parent) and parent != parent.parent:
        parent = parent.parent
    try:
        name_max, path_max = os.pathconf(parent, "PC_NAME_MAX"), os.pathconf(parent, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    longest = max(path.parts, key=lambda p: len(p.encode()))
    if len(longest.encode()) > name_max:
        return f"a name of {len(longest.encode())} bytes, the filesystem takes at most {name_max}"
    if len(str(path).encode()) + 64 > path_max:  # room for the run's own files below it
        return f"{len(str(path).encode())} bytes in all, the filesystem takes at most {path_max} with the run's files"
    return ""


def clear_earlier_attempt(run_dir: Path, checkpoints: bool = False) -> None:
    """Remove the hand-off files (and with ``checkpoints`` the checkpoints) an earlier run left in ``run_dir``."""
    internal = Path(run_dir) / INTERNAL_DIR
    for pattern in STALE_HANDOFFS:
        for path in internal.glob(pattern):
            path.unlink(missing_ok=True)
    if checkpoints:
        shutil.rmtree(Path(run_dir) / "checkpoints", ignore_errors=True)


def release_run_dir(run_dir: Path) -> None:
    """Give up the lock on ``run_dir`` (the process's exit does it too) and the room kept for its record."""
    fd = _HELD.pop(Path(os.path.abspath(run_dir)), None)
    if fd is not None:
        release_space(run_dir)
        os.close(fd)


def holds_earlier_runs(sweep_dir: Path) -> Path | None:
    """The first record of an earlier run below ``sweep_dir`` (None: there is none); a sweep there resumes
    (gnnq.launch.sweep_state)."""
    return next(iter(sorted(Path(sweep_dir).glob(f"*/{RECORD_FILE}"))), None)


def refuse(exc: GnnqError) -> None:
    """End gnnq with ``exc``'s one line and exit code 2."""
    print(f"gnnq: error: {exc}", file=sys.stderr, flush=True)
    sys.exit(2)


try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover - hydra-core is a dependency
    Callback = object


class PlaceCheck(Callback):
    """Before Hydra creates and writes into the run (or sweep) directory: check the place and claim it."""

    def on_run_start(self, config, **kwargs) -> None:
        from omegaconf import open_dict, read_write

        run_dir = Path(os.path.abspath(os.path.expanduser(str(config.hydra.run.dir))))
        with read_write(config.hydra), open_dict(config.hydra):
            config.hydra.run.dir = str(run_dir)  # pinned: the timestamp it resolved to is the one Hydra uses
        try:
            claim_run_dir(run_dir, _root_key(config), overwrite=bool(config.get("overwrite", False)))
        except PlaceError as exc:
            refuse(exc)

    def on_multirun_start(self, config, **kwargs) -> None:
        from omegaconf import open_dict, read_write

        sweep_dir = Path(os.path.abspath(os.path.expanduser(str(config.hydra.sweep.dir))))
        with read_write(config.hydra), open_dict(config.hydra):
            config.hydra.sweep.dir = str(sweep_dir)
        SWEEP_DIR[:] = [str(sweep_dir)]
        try:
            claim_run_dir(
                sweep_dir, _root_key(config), record=False
            )  # one sweep at a time; each point claims its own dir too
        except PlaceError as exc:
            refuse(exc)
        earlier = holds_earlier_runs(sweep_dir)
        if earlier is not None:
            how = (
                "overwrite=true: every point runs again"
                if config.get("overwrite", False)
                else "points done there are skipped, failed ones run again (overwrite=true: all run again)"
            )
            print(f"[gnnq] hydra.sweep.dir {sweep_dir} holds an earlier attempt of a sweep: {how}", flush=True)


def _root_key(config) -> str:
    """How the user set where runs go, for the error line."""
    from omegaconf import OmegaConf

    # unresolved: an override's value may hold an interpolation only a job can resolve (``${hydra.job.num}``)
    overrides = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.hydra, resolve=False)]
    for key in ("hydra.run.dir", "hydra.sweep.dir"):
        if any(o.startswith(key + "=") for o in overrides):
            return key
    task = [str(o) for o in OmegaConf.to_container(config.hydra.overrides.task, resolve=False)]
    if not any(o.startswith("runs_root=") for o in task) and os.environ.get("GNNQ_RUNS"):
        return "GNNQ_RUNS"
    return "runs_root"


def ranks_log(run_dir: Path) -> Path:
    """The log of a run's ranks (torchrun's, or gnnq's own rank starter's) under ``run_dir``/logs/."""
    return Path(run_dir) / "logs" / "torchrun.log"
