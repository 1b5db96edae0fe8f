"""Read and check a run's trace (format version 1: docs/projection.md#the-trace-format).

``read_trace(run_dir)`` returns a ``Trace``: the run's ``trace/meta.json`` and, per rank, its epochs from
``trace/rank<r>.jsonl``. Anything missing or malformed is a one-line ``ConfigError`` naming the file and field.
Unknown fields are ignored, as the format allows.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from gnnq.errors import ConfigError

VERSION = 1
OPS = ("compute", "post", "wait", "allreduce")
_REQUIRED = {
    "compute": ("t0", "t1"),
    "post": ("t0", "t1", "msg", "send_bytes", "recv_bytes"),
    "wait": ("t0", "t1", "msg"),
    "allreduce": ("t0", "t1", "bytes"),
}


@dataclass
class Trace:
    """One traced run: ``meta`` (trace/meta.json), ``epochs[r]`` (rank r's epoch objects in order) and the
    run's ``record`` (record.json, when there is one)."""

    run_dir: Path
    meta: dict
    epochs: list[list[dict]]
    record: dict | None = field(default=None)

    @property
    def world_size(self) -> int:
        return int(self.meta["world_size"])

    @property
    def label(self) -> str:
        """The method, as the run named it: its experiment, else its parallel strategy and quantizer."""
        m = self.meta.get("method") or {}
        return m.get("experiment") or f"{m.get('parallel')}/{m.get('quantizer')}"

    def measured_epoch_s(self) -> float:
        """The traced epoch time: per epoch the slowest rank's ``epoch_s``, median over epochs."""
        per_epoch = [max(self.epochs[r][e]["epoch_s"] for r in range(self.world_size)) for e in range(self.num_epochs)]
        return statistics.median(per_epoch)

    def limit(self, max_epochs: int | None) -> "Trace":
        """Keep only the first ``max_epochs`` epochs of every rank (None: all)."""
        if max_epochs is not None:
            if max_epochs < 1:
                raise ConfigError(f"--max-epochs {max_epochs}: must be >= 1")
            self.epochs = [eps[:max_epochs] for eps in self.epochs]
        return self

    @property
    def num_epochs(self) -> int:
        return min(len(eps) for eps in self.epochs)


def read_trace(run_dir: Path | str) -> Trace:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: no such run directory")
    tdir = run_dir / "trace"
    if not tdir.is_dir():
        raise ConfigError(f"{run_dir}: no trace/ in this run directory (record it with tracing on: docs/projection.md)")
    meta = _read_json(tdir / "meta.json")
    _check_meta(meta, tdir / "meta.json")
    world = int(meta["world_size"])
    epochs = [_read_rank(tdir / f"rank{r}.jsonl", r, world) for r in range(world)]
    counts = {len(e) for e in epochs}
    if 0 in counts:
        empty = [r for r in range(world) if not epochs[r]]
        raise ConfigError(f"{tdir / f'rank{empty[0]}.jsonl'}: no epochs")
    record = None
    if (run_dir / "record.json").is_file():
        try:
            record = json.loads((run_dir / "record.json").read_text())
        except ValueError:
            record = None
    return Trace(run_dir, meta, epochs, record)


def _read_json(path: Path) -> dict:
    try:
        obj = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: missing (a trace needs meta.json and one rank<r>.jsonl per rank)") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{path}: must hold one JSON object")
    return obj


def _check_meta(meta: dict, path: Path) -> None:
    if meta.get("version") != VERSION:
        raise ConfigError(f"{path}: trace format version {meta.get('version')!r}; this gnnq reads version {VERSION}")
    for key in ("world_size", "hosts", "ranks_per_host", "rank_host", "cluster", "graph", "model"):
        if key not in meta:
            raise ConfigError(f"{path}: field {key!r} is missing")
    world = meta["world_size"]
    if not isinstance(world, int) or world < 1:
        raise ConfigError(f"{path}: world_size must be a positive integer (got {world!r})")
    if not isinstance(meta["rank_host"], list) or len(meta["rank_host"]) != world:
        raise ConfigError(f"{path}: rank_host must list the host of each of the {world} ranks")
    parts = (meta.get("graph") or {}).get("parts")
    if parts is not None and len(parts) != world:
        raise ConfigError(f"{path}: graph.parts must have one entry per rank ({world}), has {len(parts)}")


def _read_rank(path: Path, rank: int, world: int) -> list[dict]:
    if not path.is_file():
        raise ConfigError(f"{path}: missing (a trace needs meta.json and one rank<r>.jsonl per rank)")
    epochs = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            ep = json.loads(line)
        except ValueError as exc:
            raise ConfigError(f"{path}:{n}: not valid JSON ({exc})") from None
        if not isinstance(ep, dict) or "epoch_s" not in ep or not isinstance(ep.get("events"), list):
            raise ConfigError(f"{path}:{n}: an epoch needs 'epoch_s' and a list 'events'")
        for ev in ep["events"]:
            _check_event(ev, path, n, world)
        epochs.append(ep)
    return epochs


def _check_event(ev: dict, path: Path, line: int, world: int) -> None:
    op = ev.get("op") if isinstance(ev, dict) else None
    if op not in OPS:
        raise ConfigError(f"{path}:{line}: unknown op {op!r}; allowed: {', '.join(OPS)}")
    for key in _REQUIRED[op]:
        if key not in ev:
            raise ConfigError(f"{path}:{line}: a {op!r} event needs {key!r}")
    if ev["t1"] < ev["t0"]:
        raise ConfigError(f"{path}:{line}: a {op!r} event ends before it starts (t0={ev['t0']}, t1={ev['t1']})")
    if op == "post":
        for key in ("send_bytes", "recv_bytes"):
            if not isinstance(ev[key], list) or len(ev[key]) != world:
                raise ConfigError(f"{path}:{line}: post {key} must have {world} entries (one per rank)")
