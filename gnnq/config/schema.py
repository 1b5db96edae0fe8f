"""Typed configuration: one dataclass per config group choice, registered in Hydra's ConfigStore (gnnq.config.compose).

Each group's node starts as the group's base class (the keys every choice shares); the choice's
file in conf/<group>/ lists ``/schema/<group>/<choice>@_here_`` first in its defaults, which merges
that choice's dataclass in, so the node holds exactly that choice's keys with their defaults.
OmegaConf then rejects another choice's keys, unknown keys and values of the wrong type while
Hydra composes; ``gnnq.config.validate`` checks the values that types cannot express.
The defaults live here; a choice's YAML holds its name and only what differs.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

# --- value bounds ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Bounds:
    """A numeric key's allowed range (gnnq.config.validate checks it; docs/config.md lists it): ``low`` and ``high``
    are its ends (None: open), each inclusive unless marked exclusive."""

    low: float | None = None
    low_exclusive: bool = False
    high: float | None = None
    high_exclusive: bool = False


BOUNDS = "bounds"  # the key of a field's metadata that holds its Bounds
MAX_TIMEOUT_S = 30 * 24 * 3600  # 30 days: far above any collective, far below timedelta's and gloo's limits


def bounded(default, *, ge=None, gt=None, le=None, lt=None):
    """A field with ``default`` whose values must be >= ge (or > gt) and <= le (or < lt); a choice's dataclass that
    only changes the default keeps the bounds (``bounds_of``)."""
    if (ge is not None and gt is not None) or (le is not None and lt is not None):
        raise ValueError("bounded(): give ge or gt, and le or lt, not both")
    low, high = (gt if ge is None else ge), (lt if le is None else le)
    return field(default=default, metadata={BOUNDS: Bounds(low, gt is not None, high, lt is not None)})


def bounds_of(cls: type, name: str) -> Bounds | None:
    """The bounds of ``cls``'s field ``name``, from the nearest class of its ancestry whose field declares them."""
    for klass in cls.__mro__:
        declared = getattr(klass, "__dataclass_fields__", {}).get(name)
        if declared is not None and BOUNDS in declared.metadata:
            return declared.metadata[BOUNDS]
    return None


def schema_bounds(cls: type, prefix: str = "") -> dict[str, Bounds]:
    """Every bounded key of ``cls`` and of its nested dataclasses (``trainer.grad_sync.rank``), in field order."""
    hints = typing.get_type_hints(cls)
    out: dict[str, Bounds] = {}
    for f in fields(cls):
        if is_dataclass(hints[f.name]):
            out.update(schema_bounds(hints[f.name], f"{prefix}{f.name}."))
        elif (bounds := bounds_of(cls, f.name)) is not None:
            out[f"{prefix}{f.name}"] = bounds
    return out


# --- dataset ---------------------------------------------------------------------------------


@dataclass
class DatasetConfig:
    """A named dataset with its own split (PyG, OGB)."""

    name: str = MISSING
    # Data root; falls back to env GNNQ_DATA, then ~/.cache/gnnq/data.
    root: Optional[str] = None
    # Try to download missing files (PyG / OGB); false fails fast naming the files needed.
    download: bool = True
    # Add reverse edges so every edge is present in both directions.
    to_undirected: bool = True


@dataclass
class SeededSplitDatasetConfig(DatasetConfig):
    """A dataset split here: seeded and stratified by class."""

    # Fractions of every class in train and val; the rest is test (train_frac > 0, train_frac + val_frac < 1).
    train_frac: float = 0.6
    val_frac: float = 0.2
    seed: int = 0  # the split's seed (and the generator's, for synthetic)


@dataclass
class FilesDatasetConfig(SeededSplitDatasetConfig):
    """Bring your own graph; the split is used when the directory has no train/val/test files."""

    name: str = "files"
    path: Optional[str] = None  # required: the directory holding edges, features and labels
    graph_name: Optional[str] = None  # what run dirs, W&B and reports call this graph (null: path's folder name)


@dataclass
class SyntheticDatasetConfig(SeededSplitDatasetConfig):
    """Stochastic block model with class-correlated noisy features."""

    name: str = "synthetic"
    num_nodes: int = bounded(10000, ge=2)
    avg_degree: float = bounded(12.0, gt=0.0)
    num_classes: int = bounded(8, ge=2)
    feature_dim: int = bounded(64, ge=1)
    homophily: float = bounded(0.5, ge=0.0, le=1.0)  # fraction of edges inside the source's class
    feature_noise: float = bounded(3.0, ge=0.0)  # std of Gaussian noise around the class centroid


# --- partitioner, model --------------------------------------------------------------------


@dataclass
class PartitionerConfig:
    name: str = "metis"
    seed: int = 0


@dataclass
class ModelConfig:
    """GCN and GraphSAGE: the keys every model shares, with AdaQP's defaults."""

    name: str = "gcn"
    layers: int = bounded(3, ge=1)
    hidden: int = bounded(256, ge=1)
    dropout: float = bounded(0.5, ge=0.0, lt=1.0)
    norm: str = "layer"
    # after each hidden convolution: norm_act_dropout (gnnq: LayerNorm, ReLU, then dropout) | dropout_norm_act
    # (AdaQP's public code: dropout, then LayerNorm and ReLU)
    layer_order: str = "norm_act_dropout"


@dataclass
class GamlpModelConfig(ModelConfig):
    """GA-MLP with the pdADMM-G paper's sizes: plain ReLU layers."""

    name: str = "gamlp"
    layers: int = 10
    hidden: int = 500
    dropout: float = 0.0
    norm: str = "none"
    hops: int = bounded(4, ge=0)  # inputs [X, AX, ..., A^hops X]


# --- quantizer -------------------------------------------------------------------------------


@dataclass
class QuantizerConfig:
    """Exact fp32 messages."""

    name: str = "fp32"


@dataclass
class UniformQuantizerConfig(QuantizerConfig):
    """Stochastic row-wise codes, one width for every message."""

    name: str = "uniform"
    bits: int = 8  # forward messages (embeddings); with adaptive, every message's width until the first assignment
    grad_bits: Optional[int] = None  # backward messages (gradients): null = same as bits; 32 = exact fp32
    param_dtype: str = "fp16"  # per-row zero point and step on the wire: fp16 (4 bytes/row) | fp32 (8)
    quantize_input: bool = False  # layer-0 features: default sent once in fp32 and cached
    nonfinite: str = "error"  # NaN/inf in a message: error | zero (zeroed and counted)


@dataclass
class AdaptiveQuantizerConfig(UniformQuantizerConfig):
    """AdaQP: one width per group of rows, reassigned every assign_cycle epochs."""

    name: str = "adaptive"
    bit_choices: List[int] = field(default_factory=lambda: [2, 4, 8])  # widths the solver may pick
    group_size: int = 100  # rows per group; one width per group
    variance_weight: float = 0.5  # lambda: 1 = minimize variance only, 0 = exchange time only
    # epochs between reassignments; default: a quarter of trainer.epochs (AdaQP's 4 per run, 50 of 200), at least 1
    assign_cycle: int = "${gnnq_assign_cycle:${trainer.epochs}}"
    solver: str = "greedy"  # greedy (Lagrangian heuristic) | milp (exact, scipy HiGHS)
    # exchange time the solver minimizes: max_channel (slowest channel; gnnq: all channels are posted at once) |
    # ring_rounds (AdaQP as published: sum over its P-1 ring rounds of each round's slowest channel) |
    # sender_uplink (slowest sender, a sender's channels summed: they share its uplink)
    time_objective: str = "max_channel"
    # row ranges the variances are solved from: cycle (AdaQP: summed over every training epoch of the cycle) |
    # last_epoch (the cycle's last training epoch only)
    trace: str = "cycle"
    # backward (gradient) row influence: returned (gnnq: row sum of the owner's operator, exact for gnnq's returned
    # gradients) | adaqp (AdaQP's published weight, per holder q: sum over q's nodes w with an edge w -> u of
    # 1/deg_out(w) for SAGE, deg_out(w)^-1/2 deg_in(u)^-1/2 for GCN)
    backward_influence: str = "returned"
    milp_time_limit_s: float = 10.0  # per message; the best assignment found so far is used after it
    # profile: fit t = a * bytes + c per channel from a startup profile (AdaQP);
    # fixed: every channel is a link of link_gbit_per_s and link_latency_ms, nothing timed (reproducible widths)
    time_model: str = "profile"
    link_gbit_per_s: float = bounded(1.0, gt=0.0)  # time_model=fixed only
    link_latency_ms: float = bounded(0.1, ge=0.0)  # time_model=fixed only
    profile_repeats: int = 3  # repeats of each size in the startup time-model profile
    # sizes the profile times: sent (AdaQP's range: from the 2-bit to the 8-bit message, with row parameters) |
    # fp32 (1/8 to 2x the fp32 message, at least 1 MiB; gnnq before issue 18) |
    # published (AdaQP's code: 200 sizes from the 2-bit message at min(features, hidden) values per row - half of it to
    # the 8-bit message at max(features, hidden) + that half, no row parameters)
    profile_range: str = "sent"
    refit_time_model: bool = False  # re-profile the channels at every reassignment


@dataclass
class GridQuantizerConfig(QuantizerConfig):
    """pdADMM-G-Q (parallel=admm): values on grid_levels evenly spaced points. The default grid is gnnq's, fitted
    to where a GA-MLP's p and q lie ([-0.05, 1], 256 levels, 8-bit codes); the paper's integers -1..20
    (experiment=pdadmm_g_q_paper) round nearly all of them to 0 or 1 under gnnq's ADMM defaults."""

    name: str = "grid"
    grid_min: float = -0.05
    grid_max: float = 1.0
    grid_levels: int = 256  # sent as ceil(log2(levels)) bits each
    quantize_p: bool = True  # put p (sent backward) on the grid (the paper); false: p is sent in fp32
    quantize_q: bool = True  # put q (sent forward) on the grid; the public code quantizes q only


# --- parallel --------------------------------------------------------------------------------


@dataclass
class ParallelConfig:
    """The key every strategy has."""

    name: str = "sync"


@dataclass
class FullGraphParallelConfig(ParallelConfig):
    """sync, and the keys every full-graph strategy shares."""

    # layer-0 halo input features: once (gnnq: fetched once at setup, in fp32 unless quantizer.quantize_input) |
    # every_epoch (AdaQP's code: exchanged in every forward pass like a hidden layer's rows, quantized in training
    # when a quantizer is set)
    inputs: str = "once"


@dataclass
class OverlapParallelConfig(FullGraphParallelConfig):
    name: str = "overlap"
    # what aggregates while halo rows are in flight: columns (every inner column's term, so all rows' inner
    # neighbours; then the halo columns' terms) | central (AdaQP's published split: only rows without a halo
    # in-neighbour, marginal rows whole after the wait)
    split: str = "columns"


@dataclass
class StaleParallelConfig(FullGraphParallelConfig):
    name: str = "stale"
    # smoothing of stale rows: stale = momentum * stale + (1 - momentum) * received
    momentum: float = bounded(0.0, ge=0.0, lt=1.0)
    warmup: str = "sync"  # first epoch: sync (exchange and wait, gnnq) | zeros (zero buffers, PipeGCN's code)
    smooth: str = (
        "both"  # which stale buffers momentum smooths: both | features | gradients (PipeGCN's corr_feat / corr_grad)
    )
    # rows that go stale: post_dropout (gnnq: as aggregated, with the sender's dropout mask) | pre_dropout (PipeGCN's
    # code: the rows before dropout; the receiver draws a fresh mask on the stale rows)
    stale_rows: str = "post_dropout"


@dataclass
class PipeqsParallelConfig(FullGraphParallelConfig):
    """PipeQS (gnnq.parallel.pipeqs): PipeGCN's pipeline with a width and a skip decision per message."""

    name: str = "pipeqs"
    bit_options: List[int] = field(default_factory=lambda: [2, 4, 8, 32])  # widths it steps through; 32: exact fp32
    # E: a change (1 - cos) / 2 above it steps the width and forbids going stale
    threshold: float = bounded(0.1, ge=0.0)
    steepness: float = 10.0  # K of the width rule's sigmoid(K d / q)
    adaptive: bool = True  # false: the code's STALE=False, every message at the first width, never skipped
    # > 0 (gnnq): refresh once cached rows were reused this many epochs in a row; 0: no bound
    max_staleness: int = bounded(0, ge=0)
    warmup: str = "zeros"  # first epoch: zeros (the code's) | sync (gnnq's)
    stale_rows: str = "pre_dropout"  # as parallel=stale's: pre_dropout (the code's) | post_dropout (gnnq's)


@dataclass
class SylvieParallelConfig(FullGraphParallelConfig):
    """Sylvie (gnnq.parallel.sylvie): widths by in-degree importance; the Bounded Staleness Adaptor."""

    name: str = "sylvie"
    base_bits: int = 1  # the starting base width (1, 2, 4 or 8): rows get it and the widths above it by importance
    pipeline: bool = True  # start pipelined (the code's --enable_pipeline) or synchronous
    adaptive: bool = True  # the Bounded Staleness Adaptor; false: base width and pipeline stay as set
    warmup: str = "zeros"  # first pipelined epoch: zeros (the code's) | sync (gnnq's)
    stale_rows: str = "pre_dropout"  # as parallel=stale's: pre_dropout (the code's) | post_dropout (gnnq's)


@dataclass
class SamplingParallelConfig(FullGraphParallelConfig):
    name: str = "sampling"
    # fraction p of each peer's boundary rows exchanged per training epoch
    sampling_rate: float = bounded(0.1, gt=0.0, le=1.0)
    sample_size: str = (
        "at_least_one"  # rows per channel: floor (int(p*c), BNS-GCN's code) | at_least_one (max(1, round(p*c)), gnnq)
    )


@dataclass
class SancusParallelConfig(FullGraphParallelConfig):
    name: str = "sancus"
    # an owner re-sends a layer's rows when their relative change since its last send is >= this
    threshold: float = bounded(0.1, ge=0.0)
    # or when its last send is more than this many epochs old (SANCUS's epoch bound)
    max_staleness: int = bounded(4, ge=0)


@dataclass
class MinibatchParallelConfig(ParallelConfig):
    name: str = "minibatch"
    fanouts: List[int] = field(
        default_factory=lambda: [10]
    )  # neighbours per layer, input layer first; one value: every layer; -1: all
    batch_size: int = bounded(1024, ge=1)  # training (target) nodes per step


@dataclass
class Tensor3dParallelConfig(ParallelConfig):
    """Plexus's 3D tensor parallelism (model=gcn, model.norm=none): adjacency, features and weights in blocks over
    an X x Y x Z grid of ranks."""

    name: str = "tensor3d"
    grid: Optional[List[int]] = None  # [X, Y, Z] with X*Y*Z = ranks; null: picked by Plexus's performance models
    permutation: str = "double"  # node orders: none | single (one random P) | double (Plexus: P and P2, alternating)
    # layer-0 input block: once (gnnq: each rank keeps its block) | every_epoch (Plexus: a flat shard over the depth
    # axis, all-gathered in every forward pass)
    inputs: str = "once"
    bias: bool = True  # a bias per layer (gnnq's GCN); Plexus's layer has none
    weight_init: str = (
        "glorot"  # glorot: the Vanilla GCN's weights of the same seed | plexus: kaiming_uniform_(a=sqrt(5))
    )


@dataclass
class AdmmParallelConfig(ParallelConfig):
    """pdADMM-G (model=gamlp); trainer.epochs counts iterations, trainer.weight_decay is mu on ||W||^2."""

    name: str = "admm"
    rho: float = bounded(1.0, gt=0.0)  # penalty on p_{l+1} = q_l (and the dual step)
    # penalty on z_l = W_l p_l + b_l and q_l = relu(z_l); null: nu = rho every iteration
    nu: Optional[float] = bounded(1.0, gt=0.0)
    # warmup2: layer 1 from a 2-layer network (warmup_iterations), hidden layers per hidden_init, output random;
    # chain: the authors' chain of shallower networks (chain_*), gnnq/admm/chain.py
    init: str = "warmup2"
    hidden_init: str = "identity"  # init=warmup2: he | identity: square hidden-to-hidden layers start at the identity
    # init=warmup2, > 0: layer 1 starts from a 2-layer network trained this many iterations
    warmup_iterations: int = bounded(50, ge=0)
    # init=chain: depths of the networks before the full one
    chain_layers: List[int] = field(default_factory=lambda: [2, 5])
    chain_iterations: List[int] = field(default_factory=lambda: [200, 10])  # init=chain: ADMM iterations of each
    chain_rho: List[float] = field(default_factory=lambda: [1e-5, 1e-5])  # init=chain: each stage's start of rho = nu
    # init=chain: each stage's weight decay on ||W||^2
    chain_mu: List[float] = field(default_factory=lambda: [10.0, 1.0])
    # init=chain, quantizer=grid: q on the grid in the chain's stages too (the authors' Q chain)
    chain_quantize: bool = False
    # init=chain: each stage's stall tolerance (rho x10 when the loss fell by less); null: 1e-3 in every stage
    # (the authors' Q chain on Cora: [0.001, 0.01])
    chain_stall_tol: Optional[List[float]] = None
    # none | grow: rho x10 (up to rho_max) when the training loss stalls 2 iterations, then wait 2 more |
    # paper: the authors' rule, from iteration 4 on x10 after every iteration ending 2 stalled ones |
    # paper_q: the authors' Q script's rule, x10 only in iterations 21-49 (up to 1e-2) and from 51 (up to 1e-3)
    # (gnnq/admm/schedule.py)
    rho_schedule: str = "none"
    # p/W steps: where the search for t starts; null: half the last accepted t; the authors': 20
    step_start: Optional[float] = bounded(None, gt=0.0)
    # p/W steps: tries of t (x2 each) before the step is skipped; the authors': 11
    max_backtracks: int = bounded(30, ge=1)
    rho_max: float = bounded(100.0, gt=0.0)  # cap of rho_schedule=grow|paper|paper_q and of the chain stages' schedules
    # which layers each rank owns (gnnq/admm/partition.py): cost: contiguous blocks minimizing the largest
    # block's estimated FLOPs (gnnq) | layers: equal layer counts (the paper's and the public code's split)
    blocks: str = "cost"
    # output z step: gnnq (FISTA 1/(1/2+nu), rel tol 1e-6, best iterate) | authors (eta 4, abs 1e-3, last point)
    z_out: str = "gnnq"
    z_pick: str = "gnnq"  # hidden z step: gnnq (candidates compared with the (z-z_old)^2 term) | authors (without it)
    overlap_q: bool = True  # true: the q exchange stays in flight into the next iteration's p-steps (same iterates)


# --- cluster ---------------------------------------------------------------------------------


@dataclass
class ClusterConfig:
    """All ranks on this machine (cluster=local); the keys every cluster shares."""

    name: str = "local"
    nproc: int = bounded(2, ge=1)  # ranks per host
    hosts: int = bounded(1, ge=1)
    backend: str = "auto"  # auto | gloo | nccl (auto: nccl when CUDA is available)
    # where a rank computes: auto (CUDA with nccl, else the CPU) | cpu | cuda (with gloo: ranks share the GPUs,
    # local rank i on GPU i mod count, messages through host memory; nccl needs a GPU per local rank)
    device: str = "auto"
    timeout_s: int = bounded(300, ge=1, le=MAX_TIMEOUT_S)  # collective timeout
    threads_per_rank: int = bounded(0, ge=0)  # torch intra-op threads per rank; 0: cores / ranks
    allow_oversubscribe: bool = False  # true: no warning when ranks on a host exceed 4x its cores
    # GiB the launcher (while partitioning) and then the ranks of one host may use (checked against estimates,
    # docs/runs.md#resources);
    # null: what the host has available now (MemAvailable, within its cgroup's limit)
    memory_limit_gib: Optional[float] = None


@dataclass
class EmulatedClusterConfig(ClusterConfig):
    """Hosts emulated with network namespaces; every host's link to the switch, the same both ways
    (gnnq/launch/netns.py)."""

    name: str = "emulated"
    nproc: int = 1
    hosts: int = 2
    backend: str = "gloo"
    link: str = "1gbit"  # 1gbit | 10gbit | 25gbit: bandwidth presets; custom: bandwidth_mbit
    bandwidth_mbit: Optional[float] = None  # link=custom only
    latency_ms: float = bounded(0.0, ge=0.0)  # one-way delay between two hosts (netem)
    jitter_ms: float = bounded(0.0, ge=0.0)  # +- on latency_ms (netem)
    loss_pct: float = bounded(0.0, ge=0.0, lt=100.0)  # packets lost between two hosts (netem)
    # auto: give every host its own cores (taskset) when there are at least as many cores as hosts; on: require
    # it; off: hosts share all cores. The run's summary records each host's cores (gnnq/launch/cores.py)
    pin_cores: str = "auto"


@dataclass
class MultinodeClusterConfig(ClusterConfig):
    name: str = "multinode"
    hosts: int = 2
    rendezvous: Optional[str] = (
        None  # required: host:port of the node gnnq runs on, where the other nodes' torchruns meet it
    )


@dataclass
class SlurmClusterConfig(ClusterConfig):
    """What each run's sbatch job asks for (gnnq/launch/slurm.py)."""

    name: str = "slurm"
    partition: Optional[str] = None  # null: the cluster's default partition
    account: Optional[str] = None
    time_limit_min: int = bounded(60, ge=1)  # the job's time limit (sbatch --time), minutes
    gpus_per_node: Optional[int] = None  # null: nproc, or 0 with backend=gloo (CPU nodes)
    cpus_per_node: Optional[int] = None  # null: nproc x max(1, threads_per_rank)
    sbatch_extra: Dict[str, Any] = field(
        default_factory=dict
    )  # more sbatch options: {mem: 64G, qos: high, exclusive: true}


# --- logger, trainer, the whole config ---------------------------------------------------------


@dataclass
class LoggerConfig:
    name: str = "wandb"
    project: str = "gnnq"
    entity: Optional[str] = None
    mode: str = "offline"  # offline | online
    tags: List[str] = field(default_factory=list)
    # W&B group; null: in a multirun sweep-<the sweep dir's last two path parts>, else dataset-model-parallel-quantizer
    group: Optional[str] = None


@dataclass
class GradSyncConfig:
    """How parameter gradients are summed over ranks (gnnq.comm.grad_sync; docs/methods.md, "Gradient sync")."""

    mode: str = "allreduce"  # allreduce (exact) | fp16 | bf16 | powersgd | codec
    rank: int = bounded(4, ge=1)  # powersgd: the rank of the low-rank approximation
    error_feedback: bool = True  # powersgd: add each rank's compression error to its next gradient
    warm_start: bool = True  # powersgd: start each epoch's power iteration from the last Q
    start_epoch: int = bounded(1, ge=1)  # powersgd: epochs before this one sum exactly (torch's start_powerSGD_iter)
    # powersgd: compress a matrix only if it shrinks at least this much
    min_compression_rate: float = bounded(2.0, ge=0.0)
    bits: int = 8  # codec: bits per gradient value (1, 2, 4, 8)


@dataclass
class TrainerConfig:
    epochs: int = bounded(200, ge=1)
    lr: float = bounded(0.01, gt=0.0)
    weight_decay: float = bounded(0.0, ge=0.0)
    optimizer: str = "adam"
    eval_every: int = bounded(1, ge=1)
    seed: int = 0
    # > 0: every rank checkpoints every N epochs (not minibatch); gnnq resume=<run dir>
    checkpoint_every: int = bounded(0, ge=0)
    nonfinite_loss: str = "error"  # a NaN/inf training loss: error (the run fails, naming the epoch) | warn (goes on)
    # true: every rank writes its epochs' message timeline under <run dir>/trace/ (halo strategies, tensor3d)
    trace: bool = False
    # stop after the first evaluated epoch whose validation metric reaches this (null: all epochs; tune trials: target)
    stop_at_val: Optional[float] = bounded(None, gt=0.0)
    # stop once training time (epochs and overheads, the time-to-target clock) passes this many seconds (null: no limit)
    stop_after_s: Optional[float] = bounded(None, gt=0.0)
    # how gradients are summed over ranks: trainer.grad_sync.mode=allreduce|fp16|bf16|powersgd|codec (docs/methods.md)
    grad_sync: GradSyncConfig = field(default_factory=GradSyncConfig)


@dataclass
class Config:
    """Each group's field holds the group's base class; the chosen option's file merges its own class in."""

    dataset: DatasetConfig = field(default_factory=DatasetConfig)
    partitioner: PartitionerConfig = field(default_factory=PartitionerConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    quantizer: QuantizerConfig = field(default_factory=QuantizerConfig)
    parallel: ParallelConfig = field(default_factory=ParallelConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    # Where run directories go (Hydra's run/sweep dirs are derived from it).
    runs_root: str = "runs"
    # Whether a run may replace an earlier run in its run directory (hydra.run.dir, hydra.sweep.dir); else refused.
    overwrite: bool = False
