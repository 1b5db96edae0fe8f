"""What the report reads from one run record, defensively (older records lack newer fields): its
metrics, wall-clock throughput, hardware and date."""

from __future__ import annotations

import hashlib
import math

from gnnq.config.clusters import world_size
from gnnq.config.dataset_name import FILES, graph_name

# The record's own metrics (top-level keys), and those the report derives from the record.
RECORD_METRICS = ("test", "best_val", "epoch_time_s", "comm_time_s", "comm_bytes_per_epoch")
# wire_bytes_per_epoch: every training byte on the wire, halo messages and the gradient all-reduce together;
# TRAFFIC_METRICS: every byte a run moves, by kind (``traffic``).
TRAFFIC_METRICS = (
    "grad_sync_bytes_per_epoch",
    "eval_bytes_per_epoch",
    "once_bytes",
    "all_bytes_per_epoch",
)
DERIVED_METRICS = ("throughput", "overhead_time_s", "num_params", "wire_bytes_per_epoch", *TRAFFIC_METRICS)


def number(value) -> float | None:
    """A finite number as float; None for anything else (missing, text, bool, NaN, inf)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def dataset(rec: dict) -> str:
    """The graph a run trained on, as reports group by it: the dataset's name; for ``dataset=files`` its graph name
    and the first 8 hex digits of its content fingerprint (``road@1f2e3d4c``), so that two graphs of the same name
    never share a leaderboard (records without a fingerprint: a hash of the path, ``road@path-9a8b7c6d``)."""
    node = (rec.get("config") or {}).get("dataset") or {}
    name = graph_name(node)
    if node.get("name") != FILES:
        return name
    fingerprint = rec.get("dataset_fingerprint")
    if isinstance(fingerprint, str) and fingerprint:
        return f"{name}@{fingerprint[:8]}"
    return f"{name}@path-{hashlib.sha1(str(node.get('path')).encode()).hexdigest()[:8]}"


def summary(rec: dict) -> dict:
    s = rec.get("summary")
    return s if isinstance(s, dict) else {}


def throughput(rec: dict) -> tuple[float | None, bool]:
    """Wall-clock epochs per second including overheads (the summary's ``throughput_epochs_per_s``), and
    whether it is that; records without it fall back to 1 / median epoch time (False: overheads not counted)."""
    measured = number(summary(rec).get("throughput_epochs_per_s"))
    if measured is not None:
        return measured, True
    epoch = number(rec.get("epoch_time_s"))
    return (1.0 / epoch if epoch else None), False


def overhead_time_s(rec: dict) -> float | None:
    """Seconds of training work outside epochs (profiles, α exchange, reassignments, checkpoint writes)."""
    return number(summary(rec).get("overhead_time_s"))


def num_params(rec: dict) -> float | None:
    return (
        number(rec.get("num_params")) if rec.get("num_params") is not None else number(summary(rec).get("num_params"))
    )


def wire_bytes_per_epoch(rec: dict) -> float | None:
    """Halo bytes plus gradient all-reduce bytes per training epoch (all ranks); None where either is unknown."""
    halo, grad = number(rec.get("comm_bytes_per_epoch")), number(summary(rec).get("grad_sync_bytes_per_epoch"))
    return None if halo is None or grad is None else halo + grad


def metrics(rec: dict) -> dict[str, float | None]:
    """Every metric the report aggregates over seeds, as floats or None."""
    return {
        **{m: number(rec.get(m)) for m in RECORD_METRICS},
        "throughput": throughput(rec)[0],
        "overhead_time_s": overhead_time_s(rec),
        "num_params": num_params(rec),
        "wire_bytes_per_epoch": wire_bytes_per_epoch(rec),
        **traffic(rec),
    }


# Every byte a run moves, by kind: (metric, label, what it is). Per training epoch unless the label says once.
TRAFFIC_KINDS = (
    ("comm_bytes_per_epoch", "halo", "halo messages of training (features, embeddings, their gradients)"),
    ("grad_sync_bytes_per_epoch", "gradient all-reduce", "the model gradients' all-reduce of training"),
    ("eval_bytes_per_epoch", "evaluation", "halo messages of evaluation (exact), averaged over training epochs"),
    (
        "once_bytes",
        "setup + profiling (once)",
        "layer-0 features fetched once, and overheads' traffic: AdaQP's startup profile, alpha exchange",
    ),
)


def traffic(rec: dict) -> dict[str, float | None]:
    """The traffic metrics: gradient all-reduce and evaluation bytes per training epoch (all ranks), the bytes
    moved once per run (setup and overheads such as AdaQP's profile), and all of them per training epoch (the once
    bytes spread over the run's epochs); None where the record lacks a part (older records have no evaluation
    bytes)."""
    s = summary(rec)
    halo, grad = number(rec.get("comm_bytes_per_epoch")), number(s.get("grad_sync_bytes_per_epoch"))
    ev = number(s.get("eval_comm_bytes_per_epoch"))
    setup, over, epochs = number(s.get("setup_comm_bytes")), number(s.get("overhead_bytes")), number(s.get("epochs"))
    once = None if setup is None and over is None else (setup or 0.0) + (over or 0.0)
    parts = (halo, grad, ev, once, epochs)
    total = None if any(p is None for p in parts) or not epochs else halo + grad + ev + once / epochs
    return {
        "grad_sync_bytes_per_epoch": grad,
        "eval_bytes_per_epoch": ev,
        "once_bytes": once,
        "all_bytes_per_epoch": total,
    }


METRIC_NAMES = {"accuracy": "accuracy", "micro_f1": "micro-F1"}


def metric_name(rec: dict) -> str:
    """The name of the run's test and validation metric (``summary.metric``): accuracy, micro-F1."""
    metric = summary(rec).get("metric")
    return METRIC_NAMES.get(metric, str(metric)) if metric else "metric"


def ranks(rec: dict) -> int | None:
    """How many ranks trained: the record's ``world_size``, else nproc × hosts of its config."""
    world = rec.get("world_size")
    if isinstance(world, int):
        return world
    return world_size({"cluster": (rec.get("config") or {}).get("cluster") or {}})


def hosts(rec: dict) -> int | None:
    """How many hosts (machines, emulated hosts, Slurm nodes) the ranks ran on: ``cluster.hosts``."""
    value = ((rec.get("config") or {}).get("cluster") or {}).get("hosts")
    return value if isinstance(value, int) else None


def git_commit(rec: dict) -> str | None:
    """The short commit gnnq ran from, ``+dirty`` with uncommitted changes; None outside a git checkout."""
    commit = rec.get("git_commit")
    if not isinstance(commit, str) or not commit:
        return None
    return commit[:10] + ("+dirty" if rec.get("git_dirty") else "")


def torch_version(rec: dict) -> str | None:
    version = (rec.get("versions") or {}).get("torch") if isinstance(rec.get("versions"), dict) else None
    return str(version) if version else None


def emulated_cores(rec: dict) -> dict | None:
    """How an emulated run's hosts shared this machine's cores (gnnq/launch/cores.py); None for other runs and older
    records."""
    emulated = summary(rec).get("emulated")
    cores = emulated.get("cores") if isinstance(emulated, dict) else None
    return cores if isinstance(cores, dict) and number(cores.get("cores_per_host")) is not None else None


def describe_cores(cores: dict | None) -> str | None:
    """``1 core/host, own`` or ``0.5 core/host, shared, oversubscribed``."""
    if cores is None:
        return None
    parts = [f"{cores['cores_per_host']:g} core/host", "own" if cores.get("pinned") else "shared"]
    return ", ".join(parts + (["oversubscribed"] if cores.get("oversubscribed") else []))


def hardware(rec: dict) -> str | None:
    """``2× NVIDIA H200`` or ``AMD EPYC 7B13, 2 cores`` from the record's ``machine``; else the device it ran on;
    for emulated hosts, how they shared the cores (an oversubscribed emulation understates speedups)."""
    machine = rec.get("machine") if isinstance(rec.get("machine"), dict) else {}
    gpu, count = machine.get("gpu"), machine.get("gpu_count")
    emulated = describe_cores(emulated_cores(rec))
    if gpu:
        found = f"{count}× {gpu}" if isinstance(count, int) and count > 1 else str(gpu)
    elif machine.get("cpu") or machine.get("cores"):
        cpu, cores = machine.get("cpu"), machine.get("cores")
        found = ", ".join(p for p in (cpu and str(cpu), isinstance(cores, int) and f"{cores} cores") if p)
    else:
        found = summary(rec).get("device")
    found = str(found) if found else None
    return f"{found} (emulated: {emulated})" if found and emulated else found or emulated


def date(rec: dict) -> str | None:
    """The day the run finished (``YYYY-MM-DD``), from ``finished_at``."""
    finished = rec.get("finished_at")
    return finished[:10] if isinstance(finished, str) and len(finished) >= 10 else None
