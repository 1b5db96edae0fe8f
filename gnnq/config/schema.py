"""Typed configuration: one dataclass per config group, registered in Hydra's ConfigStore.

OmegaConf rejects unknown keys and values of the wrong type while Hydra composes the
config; ``gnnq.config.validate`` then checks the values that types cannot express.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class DatasetConfig:
    name: str = MISSING
    # Data root; falls back to env GNNQ_DATA, then ~/.cache/gnnq/data.
    root: Optional[str] = None
    # Try to download missing files (PyG / OGB); false fails fast naming the files needed.
    download: bool = True
    # Add reverse edges so every edge is present in both directions.
    to_undirected: bool = True
    # --- synthetic (stochastic block model) ---
    num_nodes: int = 10000
    avg_degree: float = 12.0
    num_classes: int = 8
    feature_dim: int = 64
    homophily: float = 0.5  # fraction of edges inside the source's class
    feature_noise: float = 3.0  # std of Gaussian noise around the class centroid
    seed: int = 0
    # --- bring your own graph (dataset=files) ---
    path: Optional[str] = None
    # Fractions for the seeded stratified split used when the data has no split.
    train_frac: float = 0.6
    val_frac: float = 0.2


@dataclass
class PartitionerConfig:
    name: str = "metis"  # metis | random
    seed: int = 0


@dataclass
class ModelConfig:
    name: str = "gcn"  # gcn | sage | gamlp
    layers: int = 3
    hidden: int = 256
    dropout: float = 0.5
    norm: str = "layer"  # layer | none
    hops: int = 4  # gamlp only: inputs [X, AX, ..., A^hops X]


@dataclass
class QuantizerConfig:
    name: str = "fp32"  # fp32 | uniform | adaptive | grid
    # Forward messages (embeddings): 32 with fp32; 1, 2, 4 or 8 with uniform; with adaptive,
    # the width of every message until the first assignment.
    bits: int = 32
    grad_bits: Optional[int] = None  # backward messages (gradients): null = same as bits; 32 = exact fp32
    param_dtype: str = "fp16"  # per-row zero point and step on the wire: fp16 (4 bytes/row) | fp32 (8)
    quantize_input: bool = False  # layer-0 features: default sent once in fp32 and cached
    nonfinite: str = "error"  # NaN/inf in a message: error | zero (zeroed and counted)
    # --- adaptive (AdaQP) only ---
    bit_choices: List[int] = field(default_factory=lambda: [2, 4, 8])  # widths the solver may pick
    group_size: int = 100  # rows per group; one width per group
    variance_weight: float = 0.5  # lambda: 1 = minimize variance only, 0 = exchange time only
    assign_cycle: int = 50  # epochs between reassignments
    solver: str = "greedy"  # greedy (Lagrangian heuristic) | milp (exact, scipy HiGHS)
    milp_time_limit_s: float = 10.0  # per message; the best assignment found so far is used after it
    # profile: fit t = a * bytes + c per channel from a startup profile (AdaQP);
    # fixed: every channel is a link of link_gbit_per_s and link_latency_ms, nothing timed (reproducible widths)
    time_model: str = "profile"
    link_gbit_per_s: float = 1.0
    link_latency_ms: float = 0.1
    profile_repeats: int = 3  # repeats of each size in the startup time-model profile
    refit_time_model: bool = False  # re-profile the channels at every reassignment
    # --- grid (pdADMM-G-Q, parallel=admm) only: values on grid_levels evenly spaced points ---
    grid_min: float = -1.0
    grid_max: float = 20.0
    grid_levels: int = 22  # the paper's integers -1..20; sent as ceil(log2(levels)) bits each
    quantize_q: bool = True  # also put q (sent forward) on the grid; p (sent backward) always is


@dataclass
class ParallelConfig:
    name: str = "sync"  # sync | overlap | stale | sampling | minibatch | admm
    # --- stale (PipeGCN) only ---
    momentum: float = 0.0  # smoothing of stale rows: stale = momentum * stale + (1 - momentum) * received
    # --- sampling (BNS-GCN) only ---
    sampling_rate: float = 0.1  # fraction p of each peer's boundary rows exchanged per training epoch
    # --- minibatch (single-process neighbour-sampling reference) only ---
    fanouts: List[int] = field(default_factory=lambda: [10])  # neighbours per layer, input layer first; one value: every layer; -1: all
    batch_size: int = 1024  # training (target) nodes per step
    # --- admm (pdADMM-G; model=gamlp; trainer.epochs = iterations, trainer.weight_decay = mu on ||W||^2) ---
    rho: float = 1.0  # penalty on p_{l+1} = q_l (and the dual step)
    nu: float = 1.0  # penalty on z_l = W_l p_l + b_l and q_l = relu(z_l)
    hidden_init: str = "identity"  # he | identity: square hidden-to-hidden layers start at the identity
    warmup_iterations: int = 50  # > 0: layer 1 starts from a 2-layer network trained this many iterations
    rho_schedule: str = "none"  # none | grow: rho x10 (up to rho_max) when the training loss stalls 2 iterations
    rho_max: float = 100.0


@dataclass
class ClusterConfig:
    name: str = "local"  # local | slurm | multinode
    nproc: int = 2  # ranks per host
    hosts: int = 1
    backend: str = "auto"  # auto | gloo | nccl (auto: nccl when CUDA is available)
    timeout_s: int = 300  # collective timeout
    threads_per_rank: int = 0  # torch intra-op threads per rank; 0: cores / ranks
    # --- emulated only: every host's link to the switch, the same both ways (gnnq/launch/netns.py) ---
    link: str = "1gbit"  # 1gbit | 10gbit | 25gbit: bandwidth presets; custom: bandwidth_mbit
    bandwidth_mbit: Optional[float] = None  # link=custom only
    latency_ms: float = 0.0  # one-way delay between two hosts (netem)
    jitter_ms: float = 0.0  # +- on latency_ms (netem)
    loss_pct: float = 0.0  # packets lost between two hosts (netem)
    # --- multinode only: host:port of the node gnnq runs on, where the other nodes' torchruns meet it ---
    rendezvous: Optional[str] = None
    # --- slurm only: what each run's sbatch job asks for (gnnq/launch/slurm.py) ---
    partition: Optional[str] = None  # null: the cluster's default partition
    account: Optional[str] = None
    time_limit_min: int = 60  # the job's time limit (sbatch --time), minutes
    gpus_per_node: Optional[int] = None  # null: nproc, or 0 with backend=gloo (CPU nodes)
    cpus_per_node: Optional[int] = None  # null: nproc x max(1, threads_per_rank)
    sbatch_extra: Dict[str, Any] = field(default_factory=dict)  # more sbatch options: {mem: 64G, qos: high, exclusive: true}


@dataclass
class LoggerConfig:
    name: str = "wandb"  # wandb | none
    project: str = "gnnq"
    entity: Optional[str] = None
    mode: str = "offline"  # offline | online
    tags: List[str] = field(default_factory=list)
    # W&B group; null: in a multirun the sweep (sweep-<date>-<time>), else dataset-model-parallel-quantizer
    group: Optional[str] = None


@dataclass
class TrainerConfig:
    epochs: int = 200
    lr: float = 0.01
    weight_decay: float = 0.0
    optimizer: str = "adam"  # adam | sgd | adagrad | adadelta
    eval_every: int = 1
    seed: int = 0
    checkpoint_every: int = 0  # > 0: every rank checkpoints every N epochs (not minibatch); gnnq resume=<run dir>


@dataclass
class Config:
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


# cluster=slurm (conf/cluster/slurm.yaml) selects these: hydra-submitit-launcher's Slurm launcher with its
# sbatch parameters from cluster.* (hydra_plugins/gnnq_slurm_launcher/), and multirun mode even without -m,
# so that the launcher submits every run.
SLURM_LAUNCHER = {
    "_target_": "hydra_plugins.gnnq_slurm_launcher.gnnq_slurm_launcher.GnnqSlurmLauncher",
    "submitit_folder": "${hydra.sweep.dir}/.submitit/%j",
}
MULTIRUN_MODE = {"hydra": {"mode": "MULTIRUN"}}


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="gnnq_schema", node=Config)
    cs.store(group="hydra/launcher", name="gnnq_slurm", node=SLURM_LAUNCHER, provider="gnnq")
    cs.store(group="hydra/run_mode", name="multirun", node=MULTIRUN_MODE, provider="gnnq")
