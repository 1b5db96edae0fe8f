"""Before launch: will the ranks fit in this host's memory, and are there many more ranks than cores?

The memory a rank needs is estimated from its part and the model (``rank_memory_mib``; calibrated
against the measured ``summary.peak_memory_mib_per_rank`` of real runs, docs/runs.md#resources) and
summed over the ranks that run on this machine: all of them under ``cluster=emulated``, the heaviest
host's under ``cluster=slurm`` (nodes alike), this node's under ``cluster=multinode`` and ``local``.
That sum is compared with what the host has available (MemAvailable, within the cgroup's limit), or
with ``cluster.memory_limit_gib`` when set.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gnnq.config.clusters import world_size
from gnnq.config.method import Resources
from gnnq.config.registry import METHODS
from gnnq.data.integrity import warn
from gnnq.errors import ConfigError
from gnnq.launch.clusters import cluster_of
from gnnq.launch.clusters.base import Cluster
from gnnq.track.process_memory import proc_kib

# python, torch, gloo and gnnq in one rank process (450 MiB with an empty part), and what a big part adds at once
BASE_MIB = 500.0
AGENT_MIB = 250.0  # each host's torchrun agent (RSS); local runs start their ranks without one
INNER_COPIES = 5  # per inner node, layer and hidden unit: outputs, aggregates, norm, dropout, gradients
EXTRA_COPIES = (
    2  # each: a second weight path (model=sage); halo buffers kept across epochs or in flight (the methods' resources)
)
EDGE_BYTES = (
    80  # per in-edge: the part's CSR (int64), the model's operator and its transpose (int32), the sort that builds them
)
# a sparse input (features.npz) is held as CSR rows: per non-zero its float32 value and int64 column, per row its
# int64 row pointer (gnnq.data.part.features_tensor), the inner rows and the halo rows alike (layer 0 sends CSR rows)
SPARSE_NONZERO_BYTES = 12
SPARSE_ROW_BYTES = 8
FORMULA = (
    f"per rank {BASE_MIB:.0f} MiB + (4 B x (k x inner x hidden x layers + (inner + halo) x hidden x layers) "
    f"+ (inner + halo) x f + {EDGE_BYTES} B x edges), inner/halo nodes and in-edges of its part, "
    f"f = a node's input features (dense: 4 B x features; sparse: {SPARSE_NONZERO_BYTES} B x non-zeros per row "
    f"+ {SPARSE_ROW_BYTES} B), k = {INNER_COPIES} "
)
OVERSUBSCRIBE = 4  # warn above this many ranks per core
# tensors of a parameter's size each optimizer keeps per parameter (torch.optim, as gnnq.train.optim makes them:
# Adam exp_avg and exp_avg_sq, Adadelta square_avg and acc_delta, Adagrad sum, SGD without momentum none)
OPTIMIZER_STATE = {"adam": 2, "adadelta": 2, "adagrad": 1, "sgd": 0}
MODEL_FORMULA = (
    "+ 4 B x P x (2 + s) for the model: P its parameters (a rank's block of layers under parallel=admm), "
    "weights and gradients, s = the optimizer's tensors per parameter (adam, adadelta 2; adagrad 1; sgd 0; "
    "parallel=admm: 0)"
)


@dataclass(frozen=True)
class Shape:
    """What a rank's memory grows with."""

    features: int
    hidden: int
    layers: int  # layers whose activations a rank keeps for backward
    inner_copies: int = INNER_COPIES
    model_bytes: float = 0.0  # the model's weights, gradients and optimizer state on one rank (model_state_bytes)
    feature_bytes: float | None = None  # one node's input features (feature_row_bytes); None: dense, 4 B x features

    @property
    def row_bytes(self) -> float:
        """What one node's input features hold (bytes)."""
        return 4.0 * self.features if self.feature_bytes is None else self.feature_bytes


@dataclass(frozen=True)
class ResourcePlan:
    """What the memory checks read of a run's config, read once (``resource_plan``): below it nothing takes cfg."""

    declared: dict[str, Resources]  # what the run's model, quantizer and parallel choice declare (method_resources)
    ranks: int  # world size
    cluster: Cluster  # which ranks share this machine's memory, its torchrun agents
    memory_limit_gib: float | None
    allow_oversubscribe: bool
    hidden: int
    layers: int
    layer_norm: bool  # model.norm=layer: a LayerNorm after every layer but the last
    optimizer: str

    @property
    def method(self) -> Resources:
        return self.declared["parallel"]

    @property
    def shares_one_part(self) -> bool:
        """Whether every rank reads the same single part (the whole graph), as the parallel choice declares."""
        return self.method.shared_part


def resource_plan(cfg) -> ResourcePlan:
    """The run's ResourcePlan, from its composed config."""
    return ResourcePlan(
        method_resources(cfg),
        world_size(cfg),
        cluster_of(cfg),
        cfg.cluster.get("memory_limit_gib"),  # .get: a record's config of before these keys (benchmarks/)
        bool(cfg.cluster.get("allow_oversubscribe", False)),
        cfg.model.hidden,
        cfg.model.layers,
        cfg.model.get("norm", "none") == "layer",
        cfg.trainer.optimizer,
    )


def feature_row_bytes(features: int, nonzeros: int | None, rows: int) -> float | None:
    """One node's input features (bytes): None for a dense input (``Shape`` counts 4 B x features); a sparse one
    (``nonzeros`` in all ``rows``) by its CSR arrays, SPARSE_NONZERO_BYTES per non-zero and SPARSE_ROW_BYTES per row
    (what the rank holds, even where that is more than the dense row would be)."""
    if nonzeros is None:
        return None
    return SPARSE_NONZERO_BYTES * nonzeros / max(1, rows) + SPARSE_ROW_BYTES


def formula() -> str:
    """FORMULA with the choices that add copies to k, as their registry lines declare them (``resources``)."""
    declared = {
        group: {name: registry.choice(name).resources for name in registry.names()}
        for group, registry in METHODS.items()
    }
    paths = "|".join(n for n, r in declared["model"].items() if r.weight_paths > 1)
    buffers = [
        f"{group}=" + "|".join(n for n, r in declared[group].items() if r.halo_buffers)
        for group in ("parallel", "quantizer")
    ]
    return f"{FORMULA}(+{EXTRA_COPIES} for model={paths}, +{EXTRA_COPIES} for {' or '.join(buffers)}) {MODEL_FORMULA}"


def rank_memory_mib(inner: int, halo: int, edges: int, shape: Shape) -> float:
    """The estimated peak resident memory of one rank (MiB), by FORMULA."""
    width = shape.hidden * shape.layers
    values = shape.inner_copies * inner * width + (inner + halo) * width
    features = (inner + halo) * shape.row_bytes
    return BASE_MIB + (4.0 * values + features + EDGE_BYTES * edges + shape.model_bytes) / 2**20


def model_parameters(plan: ResourcePlan, features: int, classes: int) -> int:
    """The parameter count of the run's model for ``features`` inputs and ``classes`` outputs, counted from
    its shape without building it (the launcher imports no torch): every model gnnq has (GCN, SAGE, GA-MLP) is
    ``model.layers`` linear layers from ``features`` through ``model.hidden`` to the classes, each with a bias and
    ``weight_paths`` weight matrices (SAGE: neighbours and root), and a LayerNorm (weight and bias) after every
    layer but the last when ``model.norm=layer``. tests/unit/test_bad_input.py checks it against the built models."""
    paths = plan.declared["model"].weight_paths
    dims = [features] + [plan.hidden] * (plan.layers - 1) + [max(1, classes)]
    linear = sum(paths * a * b + b for a, b in zip(dims[:-1], dims[1:]))
    norms = 2 * plan.hidden * (plan.layers - 1) if plan.layer_norm else 0
    return linear + norms


def model_state_bytes(plan: ResourcePlan, features: int, classes: int) -> float:
    """One rank's model memory by MODEL_FORMULA: 4 B x P x (weights + gradients + the optimizer's tensors)."""
    method = plan.method
    params = model_parameters(plan, features, classes)
    params *= method.layers_kept(plan.layers, plan.ranks) / max(1, plan.layers)
    state = OPTIMIZER_STATE.get(plan.optimizer, 2) if method.optimizer_state else 0
    return 4.0 * params * (2 + state)


def method_resources(cfg) -> dict[str, Resources]:
    """What the run's model, quantizer and parallel choice each declare (their classes' ``resources``)."""
    return {group: registry.choice(cfg[group].name).resources for group, registry in METHODS.items()}


def model_shape(plan: ResourcePlan, features: int, classes: int = 0, feature_bytes: float | None = None) -> Shape:
    """Full-graph training keeps every layer for backward; a method may keep fewer (an ADMM rank: the variables
    of its block of layers; the mini-batch reference: its full-graph evaluation, without gradients) and fix its
    copies. ``feature_bytes``: one node's input features when they are sparse (feature_row_bytes)."""
    r, method = plan.declared, plan.method
    layers = method.layers_kept(plan.layers, plan.ranks)
    model = model_state_bytes(plan, features, classes)
    if method.inner_copies is not None:
        return Shape(features, plan.hidden, layers, method.inner_copies, model, feature_bytes)
    extra = (r["model"].weight_paths - 1) + (method.halo_buffers or r["quantizer"].halo_buffers)
    return Shape(features, plan.hidden, layers, INNER_COPIES + EXTRA_COPIES * extra, model, feature_bytes)


def per_rank_estimates(
    plan: ResourcePlan, meta: dict, features: int, classes: int = 0, feature_bytes: float | None = None
) -> list[float]:
    """The estimate for every rank, from the parts' sizes in ``meta`` (one shared part: every rank holds it);
    ``feature_bytes``: one node's sparse input features (feature_row_bytes), None for dense ones."""
    shape = model_shape(plan, features, classes, feature_bytes)
    n, e = max(1, meta["num_nodes"]), meta["num_edges"]
    sizes = [(i, h, round(e * i / n)) for i, h in zip(meta["inner_nodes"], meta["halo_nodes"])]
    if len(sizes) != plan.ranks:  # one shared part (shares_one_part), every rank holds it
        sizes = sizes[:1] * plan.ranks
    return [rank_memory_mib(*size, shape) for size in sizes]


def available_mib(limit_gib: float | None) -> tuple[float | None, str]:
    """(MiB the ranks may use, where that number comes from); None when this host does not say."""
    if limit_gib is not None:
        return limit_gib * 1024.0, f"cluster.memory_limit_gib={limit_gib}"
    found = []
    meminfo = _meminfo_available_mib()
    if meminfo is not None:
        found.append((meminfo, "MemAvailable in /proc/meminfo"))
    cgroup = _cgroup_headroom_mib()
    if cgroup is not None:
        found.append((cgroup, "this cgroup's memory limit minus its usage"))
    return min(found) if found else (None, "unknown")


def with_held(
    available: tuple[float | None, str], limit_gib: float | None, held_mib: float, what: str
) -> tuple[float | None, str]:
    """``available`` plus ``held_mib`` this process holds already (``what``): MemAvailable does not count it, a
    cluster.memory_limit_gib covers everything."""
    avail, source = available
    if avail is None or limit_gib is not None or held_mib <= 0:
        return avail, source
    return avail + held_mib, f"{source} + {held_mib:,.0f} MiB of {what}"


def _meminfo_available_mib() -> float | None:
    kib = proc_kib("/proc/meminfo", "MemAvailable")
    return kib / 1024.0 if kib is not None else None


def _cgroup_headroom_mib() -> float | None:
    """Limit minus usage of this process's memory cgroup (v2, else v1); None without a limit."""
    for limit, usage in (
        ("memory.max", "memory.current"),
        ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes"),
    ):
        try:
            text = (Path("/sys/fs/cgroup") / limit).read_text().strip()
            if text == "max" or int(text) >= 2**60:
                return None
            return (int(text) - int((Path("/sys/fs/cgroup") / usage).read_text())) / 2**20
        except (OSError, ValueError):
            continue
    return None


def cores_here() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_launch_resources(
    plan: ResourcePlan,
    meta: dict,
    features: int,
    freed_mib: float = 0.0,
    classes: int = 0,
    feature_bytes: float | None = None,
) -> list[float]:
    """Every rank's memory estimate (MiB); ConfigError with one line when the ranks on this machine would
    not fit in its memory, a one-line warning when they far outnumber its cores. ``freed_mib``: what the
    launcher holds now and frees before the ranks start (the graph); ``feature_bytes``: one node's sparse input
    features (feature_row_bytes), None for dense ones."""
    estimates = per_rank_estimates(plan, meta, features, classes, feature_bytes)
    here = plan.cluster.ranks_here(estimates)
    warn_if_oversubscribed(plan, len(here))
    if plan.cluster.checks_memory_here():
        refuse_ranks_that_do_not_fit(plan, here, freed_mib=freed_mib)
    return [round(m, 1) for m in estimates]


def warn_if_oversubscribed(plan: ResourcePlan, ranks: int) -> None:
    """One warning line when ``ranks`` on this host far outnumber its cores (unless cluster.allow_oversubscribe)."""
    cores = cores_here()
    if ranks > OVERSUBSCRIBE * cores and not plan.allow_oversubscribe:
        warn(
            f"{ranks} ranks on {cores} core(s) of this host ({ranks / cores:.0f} per core, more than {OVERSUBSCRIBE}): "
            "they mostly wait for a CPU and epoch times measure that; set cluster.allow_oversubscribe=true to "
            "silence this"
        )


def refuse_ranks_that_do_not_fit(plan: ResourcePlan, here: list[float], note: str = "", freed_mib: float = 0.0) -> None:
    """ConfigError with one line when the ranks ``here`` (their estimates, MiB) and this host's torchrun agents
    need more than is available; ``note`` says what the estimates assume; ``freed_mib`` (what the launcher holds
    now and frees before the ranks start) counts as available too, unless cluster.memory_limit_gib sets it."""
    limit = plan.memory_limit_gib
    agents = plan.cluster.torchrun_agents_here()
    need = sum(here) + AGENT_MIB * agents
    avail, source = with_held(available_mib(limit), limit, freed_mib, "the graph the launcher frees first")
    if avail is not None and need > avail:
        agent_note = f", plus {AGENT_MIB:.0f} MiB per torchrun" if agents else ""
        raise ConfigError(
            f"not enough memory: the {len(here)} rank(s) on this host need about {need / 1024:.1f} GiB "
            f"(largest rank {max(here):,.0f} MiB{note}) but {avail / 1024:.1f} GiB is available ({source}); "
            f"estimate: {formula()}{agent_note}; use fewer ranks per host (cluster.nproc), "
            "a smaller model, or set cluster.memory_limit_gib to override the check"
        )
