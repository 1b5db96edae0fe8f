"""One registry per config group: its allowed names, what each name dispatches to, and its schema.

Every place that needs a group's choices reads them here (validate, the ConfigStore, the
dispatch in models/, parallel/, train/, the generated docs/config.md); conf/<group>/ holds one
file per choice (tests/unit/test_registries.py checks both ways). The dataset registry lives with
the loaders (gnnq.data.registry.DATASETS); ``group_registries()`` gathers them all.
"""

from __future__ import annotations

import importlib
import typing
from dataclasses import dataclass
from typing import Any, Iterable

from gnnq.config import schema as s
from gnnq.errors import ConfigError


@dataclass(frozen=True)
class Choice:
    name: str
    schema: type  # the dataclass of this choice's keys (gnnq.config.schema)
    target: Any = None  # what the name dispatches to: an object, or "module:attribute" imported on first use
    about: str = ""  # one line for docs/config.md
    trainer: str | None = None  # parallel only: "module:function" that trains with it (train, train_admm, train_minibatch)


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


_FULL_GRAPH = "gnnq.train.loop:train"

PARTITIONERS = Registry("partitioner", [
    Choice("metis", s.PartitionerConfig, "gnnq.data.partition:metis_parts", about="METIS k-way: balanced parts, few cut edges"),
    Choice("random", s.PartitionerConfig, "gnnq.data.partition:random_parts", about="a seeded random balanced assignment"),
])
MODELS = Registry("model", [
    Choice("gcn", s.ModelConfig, "gnnq.models.gnn:GNN", "graph convolution (Kipf & Welling), symmetric normalization"),
    Choice("sage", s.ModelConfig, "gnnq.models.gnn:GNN", "GraphSAGE with mean aggregation"),
    Choice("gamlp", s.GamlpModelConfig, "gnnq.models.gamlp:GAMLP", "graph-augmented MLP over [X, AX, ..., A^hops X]"),
])
QUANTIZERS = Registry("quantizer", [
    Choice("fp32", s.QuantizerConfig, "gnnq.comm.codec:message_quantization", "exact fp32 halo messages"),
    Choice("uniform", s.UniformQuantizerConfig, "gnnq.comm.codec:message_quantization",
           "stochastic row-wise quantization, one width (AdaQP's codec)"),
    Choice("adaptive", s.AdaptiveQuantizerConfig, "gnnq.comm.codec:message_quantization",
           "AdaQP: per-group widths chosen from variance and exchange time"),
    Choice("grid", s.GridQuantizerConfig, "gnnq.admm.train:admm_grids", "pdADMM-G-Q: p and q on a fixed grid (parallel=admm)"),
])  # fmt: skip
PARALLEL = Registry("parallel", [
    Choice("sync", s.ParallelConfig, "gnnq.parallel.sync:SyncStrategy", "every layer waits for current halo rows", _FULL_GRAPH),
    Choice("overlap", s.OverlapParallelConfig, "gnnq.parallel.overlap:OverlapStrategy",
           "AdaQP: aggregate what needs no halo row while halo rows are in flight", _FULL_GRAPH),
    Choice("stale", s.StaleParallelConfig, "gnnq.parallel.stale:StaleStrategy",
           "PipeGCN: halo rows and gradients from the previous epoch", _FULL_GRAPH),
    Choice("sampling", s.SamplingParallelConfig, "gnnq.parallel.sampling:SamplingStrategy",
           "BNS-GCN: a random fraction of boundary rows per epoch", _FULL_GRAPH),
    Choice("sancus", s.SancusParallelConfig, "gnnq.parallel.sancus:SancusStrategy",
           "SANCUS: an owner re-sends a layer's rows only when they changed enough", _FULL_GRAPH),
    Choice("minibatch", s.MinibatchParallelConfig, None, "single-process neighbour-sampling reference",
           "gnnq.train.minibatch:train_minibatch"),
    Choice("admm", s.AdmmParallelConfig, None, "pdADMM-G: layer-parallel ADMM (model=gamlp)", "gnnq.admm.train:train_admm"),
])  # fmt: skip
CLUSTERS = Registry("cluster", [
    Choice("local", s.ClusterConfig, about="all ranks on this machine, one torchrun (rendezvous on loopback)"),
    Choice("emulated", s.EmulatedClusterConfig, about="hosts emulated with network namespaces and shaped links (root)"),
    Choice("slurm", s.SlurmClusterConfig, about="one Slurm job per run, submitted by Hydra's submitit launcher"),
    Choice("multinode", s.MultinodeClusterConfig, about="machines you start yourself; gnnq prints their torchrun command"),
])
LOGGERS = Registry("logger", [
    Choice("wandb", s.LoggerConfig, about="Weights & Biases from the launcher (offline by default); summary = record.json"),
    Choice("none", s.LoggerConfig, about="no tracker; the run directory still holds the full record"),
])
OPTIMIZERS = Registry("trainer.optimizer", [
    Choice("adam", s.TrainerConfig, "torch.optim:Adam"),
    Choice("sgd", s.TrainerConfig, "torch.optim:SGD"),
    Choice("adagrad", s.TrainerConfig, "torch.optim:Adagrad"),
    Choice("adadelta", s.TrainerConfig, "torch.optim:Adadelta"),
])


TOP_LEVEL_KEYS = ("runs_root", "overwrite")  # the schema's scalars outside any group


def group_registries() -> dict[str, Registry]:
    """Every config group with choices, in conf/config.yaml's order."""
    from gnnq.data.registry import DATASETS

    return {"dataset": DATASETS, "partitioner": PARTITIONERS, "model": MODELS, "quantizer": QUANTIZERS,
            "parallel": PARALLEL, "cluster": CLUSTERS, "logger": LOGGERS}  # fmt: skip


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
        classes = [registry.schema(n) for registry in [group_registries().get(f.name)] if registry for n in registry.names()]
        for cls in classes or [typing.get_type_hints(s.Config)[f.name]]:
            keys |= {f"{f.name}.{g.name}" for g in fields(cls)}
    return keys | set(TOP_LEVEL_KEYS)
