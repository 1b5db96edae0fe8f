"""Rank-local training checkpoints: written atomically every ``trainer.checkpoint_every`` epochs, verified on load.

Layout under the run directory::

    checkpoints/epoch-000010/rank0.pt ... rank<N-1>.pt   one file per rank
    checkpoints/latest.json                              written last: epoch, world size, per-rank sha256 and bytes

A checkpoint exists once ``latest.json`` names it. Each rank writes its file atomically and
hashes it, rank 0 gathers the hashes and replaces ``latest.json`` atomically, then removes the
older checkpoint directories; a crash at any point leaves the previous checkpoint whole. A write
that fails (a full disk: ENOSPC) stops every rank with one line naming the errno and the file, the
new checkpoint's files are removed and the previous checkpoint stays the latest.
Rank files hold tensors and plain containers only, and are read back with
``torch.load(weights_only=True)`` after their sha256 has been checked, so nothing is unpickled
that this code did not write.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from pathlib import Path

import torch

from gnnq.comm.accounting import CONTROL
from gnnq.comm.communicator import Communicator
from gnnq.data.integrity import file_sha256
from gnnq.errors import GnnqError, describe_os_error
from gnnq.track.files import write_bytes_atomic, write_json_atomic

CHECKPOINT_DIR = "checkpoints"
LATEST_FILE = "latest.json"
FORMAT_VERSION = 1


class CheckpointError(GnnqError):
    """A checkpoint is missing, from another run shape, or corrupted."""


def latest_checkpoint(run_dir: Path) -> dict | None:
    """What ``latest.json`` says (None when the run has no checkpoint)."""
    path = Path(run_dir) / CHECKPOINT_DIR / LATEST_FILE
    if not path.is_file():
        return None
    try:
        latest = json.loads(path.read_text())
    except ValueError as exc:
        raise CheckpointError(f"{path} is not valid JSON ({exc})") from None
    if latest.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has format version {latest.get('format_version')}; this gnnq reads {FORMAT_VERSION}"
        )
    return latest


def save_checkpoint(run_dir: Path, epoch: int, state: dict, comm: Communicator) -> dict:
    """Write this rank's ``state`` for ``epoch``; collective. Returns the slowest rank's seconds and the total bytes."""
    started = time.perf_counter()
    root = Path(run_dir) / CHECKPOINT_DIR
    name = f"epoch-{epoch:06d}"
    path = root / name / f"rank{comm.rank}.pt"
    try:
        _write_rank_file(path, state)
        mine = {"sha256": file_sha256(path), "bytes": path.stat().st_size, "seconds": time.perf_counter() - started}
    except OSError as exc:
        mine = {"error": _not_written(epoch, path, exc, latest_checkpoint(run_dir))}
    everyone = comm.all_gather_object(mine, category=CONTROL)
    failed = [e["error"] for e in everyone if "error" in e]
    if failed:  # every rank stops with the same line; the new checkpoint's files go, the previous one stays whole
        if comm.rank == 0:
            shutil.rmtree(root / name, ignore_errors=True)
        comm.barrier()  # the space is free again before any rank writes its error report there
        raise CheckpointError(failed[0])
    written = {
        "checkpoint_write_s": max(e["seconds"] for e in everyone),
        "checkpoint_bytes": sum(e["bytes"] for e in everyone),
    }
    if comm.rank == 0:
        try:
            write_json_atomic(
                root / LATEST_FILE,
                {
                    "format_version": FORMAT_VERSION,
                    "epoch": epoch,
                    "dir": name,
                    "world_size": comm.world_size,
                    "sha256": [e["sha256"] for e in everyone],
                    "bytes": [e["bytes"] for e in everyone],
                    **written,
                },
            )
        except OSError as exc:
            shutil.rmtree(root / name, ignore_errors=True)
            raise CheckpointError(_not_written(epoch, root / LATEST_FILE, exc, latest_checkpoint(run_dir))) from None
        for old in root.glob("epoch-*"):
            if old.name != name:
                shutil.rmtree(old, ignore_errors=True)
    return written


def _write_rank_file(path: Path, state: dict) -> None:
    """``state`` serialized in memory first, so that a full disk surfaces as OSError (ENOSPC) naming the
    file, not as torch's ``enforce fail at inline_container.cc``; then written atomically (temp file in
    the same directory, fsync, rename)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getbuffer()
    write_bytes_atomic(path, payload)


def _not_written(epoch: int, path: Path, exc: OSError, previous: dict | None) -> str:
    """One line: which checkpoint was not written, why (errno name and path), and what is left."""
    free = ""
    try:
        st = os.statvfs(path.parent if path.parent.exists() else path.parents[1])
        free = f", {st.f_bavail * st.f_frsize / 2**20:.1f} MiB free there"
    except OSError:
        pass
    kept = f"the checkpoint of epoch {previous['epoch']} is intact" if previous else "no earlier checkpoint exists"
    return (
        f"checkpoint of epoch {epoch} not written: {describe_os_error(exc)} writing {path}{free}; {kept}; "
        "free space there or set trainer.checkpoint_every=0"
    )


def _checked_rank_file(run_dir: Path, latest: dict | None, rank: int) -> Path:
    root = Path(run_dir) / CHECKPOINT_DIR
    if latest is None:
        raise CheckpointError(
            f"{run_dir} has no checkpoint to resume from: it ran with trainer.checkpoint_every=0, "
            "or stopped before its first checkpoint"
        )
    path = root / latest["dir"] / f"rank{rank}.pt"
    if not path.is_file():
        raise CheckpointError(f"{path} is missing, although {root / LATEST_FILE} names it")
    actual = file_sha256(path)
    if actual != latest["sha256"][rank]:
        raise CheckpointError(
            f"{path} is corrupted: its sha256 {actual[:16]}... differs from {latest['sha256'][rank][:16]}... "
            f"recorded in {root / LATEST_FILE}"
        )
    return path


def verify_checkpoint(run_dir: Path) -> dict:
    """The latest checkpoint's description, after checking every rank's file; CheckpointError names what is wrong."""
    latest = latest_checkpoint(run_dir)
    for rank in range(latest["world_size"] if latest else 1):
        _checked_rank_file(run_dir, latest, rank)
    return latest


def load_checkpoint(run_dir: Path, rank: int, world_size: int) -> dict:
    """This rank's state from the latest checkpoint, after checking the run shape and the file's sha256."""
    latest = latest_checkpoint(run_dir)
    if latest is not None and latest["world_size"] != world_size:
        where = Path(run_dir) / CHECKPOINT_DIR
        raise CheckpointError(
            f"the checkpoint in {where} was written by {latest['world_size']} ranks; this run has {world_size}"
        )
    return torch.load(_checked_rank_file(run_dir, latest, rank), map_location="cpu", weights_only=True)


def rng_state(device: torch.device) -> dict:
    """The generators training draws from (dropout): the CPU one, and the device's on CUDA."""
    return {"cpu": torch.get_rng_state(), "cuda": torch.cuda.get_rng_state(device) if device.type == "cuda" else None}


def set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["cpu"])
    if device.type == "cuda" and state["cuda"] is not None:
        torch.cuda.set_rng_state(state["cuda"], device)


def _load_into(part, name: str, saved: dict, run_dir: Path) -> None:
    """``part.load_state_dict(saved)``; a checkpoint written for another shape (a config changed since, e.g.
    model.hidden) is a CheckpointError naming the first key that differs and both shapes. Nothing is written."""
    where = Path(run_dir) / CHECKPOINT_DIR
    if isinstance(part, torch.nn.Module):
        current = part.state_dict()
        for key, value in current.items():
            old = saved.get(key)
            if old is None:
                differs = f"{name}.{key} is in the model the config builds but not in the checkpoint"
            elif isinstance(old, torch.Tensor) and old.shape != value.shape:
                differs = (
                    f"{name}.{key} has shape {list(old.shape)} in the checkpoint, {list(value.shape)} in the "
                    "model the config builds"
                )
            else:
                continue
            raise CheckpointError(
                f"the checkpoint in {where} does not match the run's config: {differs}; it is left as it is"
            )
        extra = next((k for k in saved if k not in current), None)
        if extra is not None:
            raise CheckpointError(
                f"the checkpoint in {where} does not match the run's config: {name}.{extra} is in the checkpoint "
                "but not in the model the config builds; it is left as it is"
            )
    try:
        part.load_state_dict(saved)
    except (RuntimeError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(
            f"the checkpoint in {where} does not match the run's config: its {name} state does not load ({first}); "
            "it is left as it is"
        ) from None


class Checkpoints:
    """When a training loop checkpoints, what goes in, and what was written.

    A checkpoint holds, per rank: ``state_dict()`` of every stateful part (model, optimizer,
    strategy, adaptive assigner), the loop's own state (epoch, history,
    best epoch, byte counters), the RNG states and the log of earlier checkpoints.
    """

    def __init__(self, every: int, run_dir: Path | None, comm: Communicator):
        self.every = int(every) if run_dir is not None else 0
        self.run_dir, self.comm = run_dir, comm
        self.log: list[dict] = []  # one entry per checkpoint written: epoch, slowest rank's seconds, bytes of all ranks
        self.resumed: dict | None = None

    def due(self, epoch: int) -> bool:
        """Whether a checkpoint is written after ``epoch``."""
        return bool(self.every) and epoch % self.every == 0

    def save(self, epoch: int, stateful: dict, loop_state: dict, device: torch.device) -> None:
        """Write the checkpoint of ``epoch``; collective."""
        state = {
            "loop": loop_state,
            "rng": rng_state(device),
            "log": self.log,
            **{name: part.state_dict() for name, part in stateful.items() if part is not None},
        }
        self.log.append({"epoch": epoch, **save_checkpoint(self.run_dir, epoch, state, self.comm)})

    def restore(self, stateful: dict, device: torch.device) -> dict:
        """Load the latest checkpoint into ``stateful``; returns the loop state. Collective."""
        started = time.perf_counter()
        if self.run_dir is None:
            raise CheckpointError("resuming needs the run directory that holds the checkpoints")
        latest = latest_checkpoint(self.run_dir)
        state = load_checkpoint(self.run_dir, self.comm.rank, self.comm.world_size)
        for name, part in stateful.items():
            if part is None:
                continue
            if name not in state:
                raise CheckpointError(
                    f"the checkpoint in {self.run_dir} has no {name} state; was the run's config changed?"
                )
            _load_into(part, name, state[name], self.run_dir)
        set_rng_state(state["rng"], device)
        written = {k: latest[k] for k in ("checkpoint_write_s", "checkpoint_bytes")}
        self.log = [
            *state["log"],
            {"epoch": state["loop"]["epoch"], **written},
        ]  # the one resumed from is not in its own file
        seconds = max(self.comm.all_gather_object(time.perf_counter() - started, category=CONTROL))
        self.resumed = {"from_epoch": state["loop"]["epoch"], "load_s": seconds}
        return state["loop"]

    def describe(self) -> dict:
        times = [entry["checkpoint_write_s"] for entry in self.log]
        return {
            "every": self.every,
            "written": len(self.log),
            "write_s_mean": sum(times) / len(times) if times else None,
            "write_s_max": max(times) if times else None,
            "bytes_per_checkpoint": self.log[-1]["checkpoint_bytes"] if self.log else None,
            "log": self.log,
            "resumed_from_epoch": self.resumed["from_epoch"] if self.resumed else None,
            "resume_load_s": self.resumed["load_s"] if self.resumed else None,
        }
