"""One registry per config group: its allowed names, what each name dispatches to, and its schema.

Every place that needs a group's choices reads them here (validate, the ConfigStore, the
dispatch in data/, models/, parallel/, train/, the generated docs/config.md); conf/<group>/ holds one
file per choice (tests/unit/test_registries.py checks both ways). A choice names what it dispatches to
by "module:attribute", imported on first use: config imports nothing above it (tools/check_layers.py).

A method (model, quantizer, parallel) is one line here: schema, implementation, the choices it needs of
other groups, the names a report gives it and its resources (``gnnq.config.method``); its implementation
class owns its construction. tests/unit/test_method_registry.py fails when an entry lacks a part.
"""

from __future__ import annotations

import importlib
import typing
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from gnnq.config import schema as s
from gnnq.config.method import Resources
from gnnq.errors import ConfigError


@dataclass(frozen=True)
class Needs:
    """A choice works only with these choices of another group (checked while composing, gnnq.config.validate)."""

    group: str
    allowed: tuple[str, ...]
    why: str  # the error's reason, after "<group>=<name> is not allowed with <other>=<value>; "


@dataclass(frozen=True)
class Choice:
    name: str
    schema: type  # the dataclass of this choice's keys (gnnq.config.schema)
    target: Any = None  # what the name dispatches to: an object, or "module:attribute" imported on first use
    about: str = ""  # one line for docs/config.md
    trainer: str | None = (
        None  # parallel only: "module:function" that trains with it (one signature: gnnq.train.driver)
    )
    needs: tuple[Needs, ...] = ()  # choices of other groups it works with
    labels: Mapping[str, str] = field(default_factory=dict)  # parallel only: quantizer -> the method's name in reports
    epoch: str = "epoch"  # parallel only: what one epoch row is (report wording): epoch | iteration
    messages: str = "halo"  # parallel only: what its counted messages are (report wording)
    # methods only: what a rank of it holds and what the launcher prepares for it (gnnq.config.method), declared
    # here so that the launcher reads it without importing the implementation (and torch)
    resources: Resources | None = None
    # "module:function" checking the choice's own values, given the whole config (gnnq.config.method_checks,
    # gnnq.config.clusters); validate.py calls it and names no choice itself
    check: str | None = None
    # parallel only: what a trace's meta.json says of the strategy (``method.<flag>: true``; gnnq.train.trace_setup)
    trace_flags: tuple[str, ...] = ()
    # parallel only: why trainer.checkpoint_every is refused with it ("" : its trainer checkpoints)
    no_checkpoints: str = ""
    # parallel only: its trainer writes trace/ with trainer.trace=true (besides FULL_GRAPH_TRAINER's, which all do)
    traces: bool = False
    # quantizer only: "module:Class" that assigns its bit-widths during training (gnnq.train.full_graph)
    assigner: str | None = None
    # model only: how a sampled block aggregates (gnnq.train.neighbor_sampler): symmetric | mean | "" (none)
    aggregation: str = ""

    @property
    def traced(self) -> bool:
        """Whether trainer.trace=true is allowed with this parallel choice (its trainer records a trace)."""
        return self.traces or self.trainer == FULL_GRAPH_TRAINER


class Registry:
    """The choices of one config group (``dataset``) or key (``trainer.optimizer``), in a fixed order."""

    def __init__(self, key: str, choices: Iterable[Choice]):
        self.key = key
        self._choices = {c.name: c for c in choices}

    def names(self) -> tuple[str, ...]:
        return tuple(self._choices)

    def choices(self) -> tuple[Choice, ...]:
        return tuple(self._choices.values())

    def __contains__(self, name: object) -> bool:
        return name in self._choices

    def choice(self, name: str) -> Choice:
        choice = self._choices.get(name)
        if choice is None:
            raise ConfigError(f"{self.key}={name!r} is not allowed; allowed: {', '.join(self._choices)}")
        return choice

    def schema(self, name: str) -> type:
        return self.choice(name).schema

    def target(self, name: str) -> Any:
        """What ``name`` dispatches to, imported now if the registry names it by "module:attribute"."""
        return resolve(self.choice(name).target)

    def trainer(self, name: str) -> Any:
        return resolve(self.choice(name).trainer)


def resolve(ref: Any) -> Any:
    if not isinstance(ref, str):
        return ref
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


_CHECKS = "gnnq.config.method_checks"  # the methods' own value checks
TRACE_FLAGS = ("overlap", "stale", "sampled")  # every parallel choice's trace meta says each, true or false
FULL_GRAPH_TRAINER = "gnnq.train.full_graph:train"  # the trainer of every parallel choice that is a halo strategy
_NO_ADAPTIVE = Needs(
    "quantizer", ("fp32", "uniform"), "per-row widths need every boundary row each epoch: use quantizer=fp32 or uniform"
)


def _dataset(name: str, loader: str, about: str, schema: type = s.DatasetConfig) -> Choice:
    """A dataset: its loader family in gnnq.data.registry (which loads any of its names, cfg.name)."""
    return Choice(name, schema, f"gnnq.data.registry:{loader}", about)


_NPZ_SPLIT = "the pdADMM-G authors' split"
DATASETS = Registry(
    "dataset",
    [
        _dataset("cora", "PYG", "PyG Planetoid: 2708 nodes"),
        _dataset("citeseer", "PYG", "PyG Planetoid: 3327 nodes"),
        _dataset("pubmed", "PYG", "PyG Planetoid: 19717 nodes"),
        _dataset("reddit", "PYG", "PyG Reddit: 232965 nodes"),
        _dataset("flickr", "PYG", "PyG Flickr: 89250 nodes"),
        _dataset("yelp", "PYG", "PyG Yelp: 716847 nodes"),
        _dataset("amazon-products", "PYG", "PyG AmazonProducts: 1569960 nodes"),
        _dataset("ogbn-arxiv", "OGB", "OGB: 169343 nodes"),
        _dataset("ogbn-products", "OGB", "OGB: 2449029 nodes"),
        _dataset("amazon-computers", "NPZ", f"PyG Computers npz: 13752 nodes; {_NPZ_SPLIT}"),
        _dataset("amazon-photo", "NPZ", f"PyG Photo npz: 7650 nodes; {_NPZ_SPLIT}"),
        _dataset("coauthor-cs", "NPZ", f"PyG CS npz: 18333 nodes; {_NPZ_SPLIT}"),
        _dataset("coauthor-physics", "NPZ", f"PyG Physics npz: 34493 nodes; {_NPZ_SPLIT}"),
        _dataset("files", "FILES", "your own graph from a directory (docs/datasets.md)", s.FilesDatasetConfig),
        _dataset(
            "synthetic",
            "SYNTHETIC",
            "stochastic block model with class-correlated features; no download",
            s.SyntheticDatasetConfig,
        ),
    ],
)

PARTITIONERS = Registry(
    "partitioner",
    [
        Choice(
            "metis",
            s.PartitionerConfig,
            "gnnq.data.partition:metis_parts",
            about="METIS k-way: balanced parts, few cut edges",
        ),
        Choice(
            "random",
            s.PartitionerConfig,
            "gnnq.data.partition:random_parts",
            about="a seeded random balanced assignment",
        ),
    ],
)
MODELS = Registry(
    "model",
    [
        Choice(
            "gcn",
            s.ModelConfig,
            "gnnq.models.gnn:GNN",
            "graph convolution (Kipf & Welling), symmetric normalization",
            resources=Resources(),
            aggregation="symmetric",
        ),
        Choice(
            "sage",
            s.ModelConfig,
            "gnnq.models.gnn:GNN",
            "GraphSAGE with mean aggregation",
            resources=Resources(weight_paths=2),
            aggregation="mean",
        ),
        Choice(
            "gamlp",
            s.GamlpModelConfig,
            "gnnq.models.gamlp:GAMLP",
            "graph-augmented MLP over [X, AX, ..., A^hops X]",
            resources=Resources(propagated_inputs=True),
            check=f"{_CHECKS}:check_gamlp",
        ),
    ],
)
QUANTIZERS = Registry(
    "quantizer",
    [
        Choice(
            "fp32", s.QuantizerConfig, "gnnq.comm.codec:Fp32Messages", "exact fp32 halo messages", resources=Resources()
        ),
        Choice(
            "uniform",
            s.UniformQuantizerConfig,
            "gnnq.comm.codec:UniformMessages",
            "stochastic row-wise quantization, one width (AdaQP's codec)",
            resources=Resources(),
            check=f"{_CHECKS}:check_uniform",
        ),
        Choice(
            "adaptive",
            s.AdaptiveQuantizerConfig,
            "gnnq.comm.codec:AdaptiveMessages",
            "AdaQP: per-group widths chosen from variance and exchange time",
            resources=Resources(halo_buffers=True),  # the traced row ranges and the mixed-width wire buffers
            check=f"{_CHECKS}:check_adaptive",
            assigner="gnnq.adaptive.assigner:AdaptiveAssigner",
        ),
        Choice(
            "grid",
            s.GridQuantizerConfig,
            "gnnq.comm.grid_codec:GridMessages",
            "pdADMM-G-Q: p and q on a fixed grid (parallel=admm)",
            needs=(Needs("parallel", ("admm",), "it quantizes pdADMM-G's messages (parallel=admm)"),),
            resources=Resources(),
            check=f"{_CHECKS}:check_grid",
        ),
    ],
)
PARALLEL = Registry(
    "parallel",
    [
        Choice(
            "sync",
            s.FullGraphParallelConfig,
            "gnnq.parallel.sync:SyncStrategy",
            "every layer waits for current halo rows",
            FULL_GRAPH_TRAINER,
            labels={"fp32": "Vanilla", "adaptive": "AdaQP-q", "uniform": "uniform"},
            resources=Resources(),  # every layer's activations for backward; no halo buffer kept
        ),
        Choice(
            "overlap",
            s.OverlapParallelConfig,
            "gnnq.parallel.overlap:OverlapStrategy",
            "AdaQP: aggregate what needs no halo row while halo rows are in flight",
            FULL_GRAPH_TRAINER,
            labels={"fp32": "AdaQP-p", "adaptive": "AdaQP", "uniform": "AdaQP-p + uniform"},
            resources=Resources(halo_buffers=True),  # halo rows in flight while the inner aggregate runs
            trace_flags=("overlap",),
        ),
        Choice(
            "stale",
            s.StaleParallelConfig,
            "gnnq.parallel.stale:StaleStrategy",
            "PipeGCN: halo rows and gradients from the previous epoch",
            FULL_GRAPH_TRAINER,
            labels={"fp32": "PipeGCN", "uniform": "PipeGCN + uniform"},
            resources=Resources(halo_buffers=True),  # the previous epoch's halo rows and gradients
            trace_flags=("stale",),
        ),
        Choice(
            "pipeqs",
            s.PipeqsParallelConfig,
            "gnnq.parallel.pipeqs:PipeQSStrategy",
            "PipeQS: PipeGCN's pipeline, each message's width and skip chosen from how its rows change",
            FULL_GRAPH_TRAINER,
            needs=(Needs("quantizer", ("uniform",), "its widths are the uniform codec's: use quantizer=uniform"),),
            labels={"uniform": "PipeQS"},
            resources=Resources(halo_buffers=True),  # the stale rows and gradients, and the copies before them
        ),
        Choice(
            "sylvie",
            s.SylvieParallelConfig,
            "gnnq.parallel.sylvie:SylvieStrategy",
            "Sylvie: 1-8-bit rows by in-degree importance, pipelined or synchronous by the loss's progress",
            FULL_GRAPH_TRAINER,
            needs=(Needs("quantizer", ("uniform",), "its widths are the uniform codec's: use quantizer=uniform"),),
            labels={"uniform": "Sylvie"},
            resources=Resources(halo_buffers=True),  # the stale rows and gradients, and the mixed-width wire buffers
        ),
        Choice(
            "sampling",
            s.SamplingParallelConfig,
            "gnnq.parallel.sampling:SamplingStrategy",
            "BNS-GCN: a random fraction of boundary rows per epoch",
            FULL_GRAPH_TRAINER,
            needs=(_NO_ADAPTIVE,),
            labels={"fp32": "BNS-GCN", "uniform": "BNS-GCN + uniform"},
            resources=Resources(halo_buffers=True),  # the sampled rows and their scaled halo copy
            trace_flags=("sampled",),  # rows of each message drawn per epoch
        ),
        Choice(
            "sancus",
            s.SancusParallelConfig,
            "gnnq.parallel.sancus:SancusStrategy",
            "SANCUS: an owner re-sends a layer's rows only when they changed enough",
            FULL_GRAPH_TRAINER,
            needs=(_NO_ADAPTIVE,),
            labels={"fp32": "SANCUS"},
            resources=Resources(halo_buffers=True),  # the rows last sent and the cached halo rows
        ),
        Choice(
            "minibatch",
            s.MinibatchParallelConfig,
            "gnnq.train.minibatch:MinibatchTrainer",
            "single-process neighbour-sampling reference",
            "gnnq.train.minibatch:train_minibatch",
            needs=(Needs("quantizer", ("fp32",), "it sends no messages: use quantizer=fp32"),),
            labels={"fp32": "Mini-batch"},
            resources=Resources(kept_layers="one", inner_copies=3),  # a full-graph evaluation without gradients
            check=f"{_CHECKS}:check_minibatch",
            no_checkpoints="a single-process reference",
        ),
        Choice(
            "tensor3d",
            s.Tensor3dParallelConfig,
            "gnnq.parallel.tensor3d:Tensor3dStrategy",
            "Plexus: a GCN's adjacency, features and weights in blocks over an X x Y x Z grid of ranks",
            "gnnq.train.tensor3d:train_tensor3d",
            needs=(
                Needs("model", ("gcn",), "it trains model=gcn (with model.norm=none)"),
                Needs("quantizer", ("fp32", "uniform"), "allowed: fp32 (Plexus), uniform (gnnq's quantized grid)"),
            ),
            labels={"fp32": "Plexus", "uniform": "Plexus + uniform"},
            messages="grid",  # its messages are the grid's collectives, not halo rows
            traces=True,  # trace/: its collectives on sub-groups (op allreduce with group, layer, direction)
            resources=Resources(shared_part=True),  # every rank reads the whole graph and keeps its blocks
            check=f"{_CHECKS}:check_tensor3d",
        ),
        Choice(
            "admm",
            s.AdmmParallelConfig,
            "gnnq.admm.train:AdmmTrainer",
            "pdADMM-G: layer-parallel ADMM (model=gamlp)",
            "gnnq.admm.train:train_admm",
            needs=(
                Needs("model", ("gamlp",), "it trains model=gamlp"),
                Needs("quantizer", ("fp32", "grid"), "allowed: fp32 (pdADMM-G), grid (pdADMM-G-Q)"),
            ),
            labels={"fp32": "pdADMM-G", "grid": "pdADMM-G-Q"},
            epoch="iteration",  # an epoch row is one ADMM iteration
            messages="p/q",  # its messages are p and q between layer blocks, not halo rows
            resources=Resources(
                shared_part=True, kept_layers="block", inner_copies=5, single_label=True, optimizer_state=False
            ),
            check=f"{_CHECKS}:check_admm",
        ),
    ],
)


def _cluster(name: str, schema: type, cls: str, about: str) -> Choice:
    """A cluster: its schema, its class in gnnq/launch/clusters/<name>.py, its value checks in gnnq.config.clusters."""
    return Choice(name, schema, f"gnnq.launch.clusters.{name}:{cls}", about, check=f"gnnq.config.clusters:check_{name}")


CLUSTERS = Registry(
    "cluster",
    [
        _cluster(
            "local",
            s.ClusterConfig,
            "LocalCluster",
            "all ranks on this machine, started by gnnq itself (store on loopback)",
        ),
        _cluster(
            "emulated",
            s.EmulatedClusterConfig,
            "EmulatedCluster",
            "hosts emulated with network namespaces and shaped links (root)",
        ),
        _cluster(
            "slurm",
            s.SlurmClusterConfig,
            "SlurmCluster",
            "one Slurm job per run, submitted by Hydra's submitit launcher",
        ),
        _cluster(
            "multinode",
            s.MultinodeClusterConfig,
            "MultinodeCluster",
            "machines you start yourself; gnnq prints their torchrun command",
        ),
    ],
)
LOGGERS = Registry(
    "logger",
    [
        Choice(
            "wandb",
            s.LoggerConfig,
            about="Weights & Biases from the launcher (offline by default); summary = record.json",
        ),
        Choice("none", s.LoggerConfig, about="no tracker; the run directory still holds the full record"),
    ],
)
OPTIMIZERS = Registry(
    "trainer.optimizer",
    [
        Choice("adam", s.TrainerConfig, "torch.optim:Adam"),
        Choice("sgd", s.TrainerConfig, "torch.optim:SGD"),
        Choice("adagrad", s.TrainerConfig, "torch.optim:Adagrad"),
        Choice("adadelta", s.TrainerConfig, "torch.optim:Adadelta"),
    ],
)


METHODS = {"model": MODELS, "quantizer": QUANTIZERS, "parallel": PARALLEL}  # the groups whose choices are methods
TOP_LEVEL_KEYS = ("runs_root", "overwrite")  # the schema's scalars outside any group


def group_registries() -> dict[str, Registry]:
    """Every config group with choices, in conf/config.yaml's order."""
    return {
        "dataset": DATASETS,
        "partitioner": PARTITIONERS,
        "model": MODELS,
        "quantizer": QUANTIZERS,
        "parallel": PARALLEL,
        "cluster": CLUSTERS,
        "logger": LOGGERS,
    }


def registries() -> dict[str, Registry]:
    """The group registries and the key registries (``trainer.optimizer``), by config key of the name."""
    return {**{f"{group}.name": r for group, r in group_registries().items()}, OPTIMIZERS.key: OPTIMIZERS}


def choice_schema(group: str, name: str) -> type:
    """The dataclass of ``group``'s choice ``name`` (the group's base class for an unknown name)."""
    registry = group_registries().get(group)
    if registry is not None and name in registry:
        return registry.schema(name)
    return typing.get_type_hints(s.Config)[group]


def config_keys() -> set[str]:
    """Every key ("group.key") some choice of the schema has: what a report may match on."""
    from dataclasses import fields

    keys = set()
    for f in fields(s.Config):
        if f.name in TOP_LEVEL_KEYS:
            continue
        classes = [
            registry.schema(n) for registry in [group_registries().get(f.name)] if registry for n in registry.names()
        ]
        for cls in classes or [typing.get_type_hints(s.Config)[f.name]]:
            keys |= {f"{f.name}.{g.name}" for g in fields(cls)}
    return keys | set(TOP_LEVEL_KEYS)
