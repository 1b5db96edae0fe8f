"""The launcher's "prepare data" step: the dataset (loaded, or its kept summary when its parts are cached), the
checks that need it, the GA-MLP inputs, and the partition cache entry the ranks read; before any rank starts.

``prepare_data(cfg)`` reads what it needs of the config once (``read_plan``: a DataPlan and the memory checks'
ResourcePlan; nothing below takes cfg), then reads the graph (``_read_graph``), checks and computes
(``_check_graph``, ``_propagate``), writes the parts (``_write_parts``) and says what it did (``_describe``), each a
step of its own."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnq.config.dataset_name import FILES, graph_name
from gnnq.data.integrity import warn
from gnnq.data.part_cache import cached_parts, prepare_parts
from gnnq.data.registry import data_root, data_root_key, dataset_sources, load_dataset
from gnnq.data.summary import GraphSummary, read_summary, recipe, write_summary
from gnnq.errors import CacheError, ConfigError, describe_os_error
from gnnq.launch.console import say
from gnnq.launch.partition_memory import check_before_partitioning, graph_mib
from gnnq.launch.resources import ResourcePlan, check_launch_resources, feature_row_bytes, resource_plan
from gnnq.launch.run_dir import check_writable


@dataclass(frozen=True)
class DataPlan:
    """What the prepare-data step reads of the config, read once (``read_plan``)."""

    dataset: DictConfig  # the dataset group, as the data layer reads it (gnnq.data.registry)
    name: str  # what the run calls its graph (gnnq.config.dataset_name.graph_name)
    root: Path  # the data root: the dataset's files, its GA-MLP inputs and its partition cache
    root_key: str  # the setting that moves it (error lines)
    partitioner: str
    partitioner_seed: int
    nparts: int  # partitions: one per rank, or one shared by all (layer-parallel ADMM)
    method_name: str  # parallel=<name> (its lines)
    hops: int | None  # model.hops (GA-MLP's propagated inputs)
    resources: ResourcePlan  # the memory checks' view of the run

    @property
    def parts_root(self) -> Path:
        return self.root / "parts"

    @property
    def propagated_inputs(self) -> bool:
        """Whether the model's inputs are [X, AX, ..., A^hops X], computed here (its registry line says so)."""
        return self.resources.declared["model"].propagated_inputs

    @property
    def files_graph(self) -> bool:
        return self.dataset.name == FILES

    def recipe(self) -> str | None:
        """The hash of the dataset's config and the files it is read from now (None: its loader does not say)."""
        sources = dataset_sources(self.dataset)
        return None if sources is None else recipe(OmegaConf.to_container(self.dataset, resolve=True), sources)


def read_plan(cfg: DictConfig) -> DataPlan:
    """The step's DataPlan, from the composed config."""
    resources = resource_plan(cfg)
    return DataPlan(
        cfg.dataset,
        graph_name(cfg.dataset),
        data_root(cfg.dataset),
        data_root_key(cfg.dataset),
        cfg.partitioner.name,
        cfg.partitioner.seed,
        1 if resources.shares_one_part else resources.ranks,  # layer-parallel ADMM: every rank reads the whole graph
        cfg.parallel.name,
        cfg.model.get("hops"),
        resources,
    )


def prepare_data(cfg: DictConfig) -> tuple[Path, dict]:
    """Load the dataset and build (or reuse) its cached parts, before any rank starts: (parts dir, their metadata
    with the memory estimates and, for a files graph, its fingerprint)."""
    plan = read_plan(cfg)
    graph, graph_mib_, cached = _read_graph(plan)
    _check_graph(plan, graph)
    fingerprint = {"dataset_fingerprint": graph.fingerprint()} if plan.files_graph else {}
    if plan.propagated_inputs:
        graph = _propagate(plan, graph)
    before: dict = {}
    parts_dir, meta = cached[1:] if cached is not None else _write_parts(plan, graph, before)
    meta = {
        **meta,
        **fingerprint,
        "memory_estimate_mib_per_rank": check_launch_resources(
            plan.resources, meta, graph.num_features, graph_mib_, graph.num_classes, _feature_bytes(graph)
        ),
    }
    if before:
        meta["memory_estimate_launcher_mib"] = before["launcher_mib"]
    _describe(plan, graph, meta)
    return parts_dir, meta


def _feature_bytes(graph) -> float | None:
    """One node's input features in a rank (bytes) when they are sparse; None for dense ones (the graph or its
    kept summary)."""
    return feature_row_bytes(graph.num_features, graph.feature_nonzeros, graph.num_nodes)


def _read_graph(plan: DataPlan):
    """(the graph or its kept summary, its MiB, (summary, parts dir, meta) when the parts are cached, else None);
    ConfigError when the run has more partitions than the graph has nodes."""
    t0 = time.perf_counter()
    cached = None if plan.propagated_inputs else _cached_summary(plan)
    if cached is not None:  # its parts are cached and its files unchanged: no load (gnnq.data.summary)
        graph = cached[0]
        for note in graph.notes:
            warn(note)
        mib = graph.mib
    else:
        graph = _load_and_summarize(plan)
        mib = graph_mib(graph)
    ranks = plan.resources.ranks
    if ranks > graph.num_nodes:
        raise ConfigError(
            f"cluster.nproc x cluster.hosts = {ranks} partitions, but dataset {graph.name} has only "
            f"{graph.num_nodes} nodes"
        )
    say(
        f"dataset {plan.name}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
        f"{graph.num_features} features, {graph.num_classes} classes ({time.perf_counter() - t0:.1f}s)"
    )
    return graph, mib, cached


def _check_graph(plan: DataPlan, graph) -> None:
    """Single-label methods on single-label data (the partition count: ``_read_graph``)."""
    if plan.resources.method.single_label and graph.multilabel:
        raise ConfigError(
            f"parallel={plan.method_name} trains single-label classification; dataset {graph.name} is multi-label"
        )


def _propagate(plan: DataPlan, graph):
    """The GA-MLP's inputs [X, AX, ..., A^hops X], computed once and cached (gnnq.data.gamlp)."""
    from gnnq.data.gamlp import gamlp_graph

    t0 = time.perf_counter()
    graph = gamlp_graph(graph, plan.hops, plan.root / "gamlp")
    say(f"GA-MLP inputs [X, AX, ..., A^{plan.hops}X]: {graph.num_features} features ({time.perf_counter() - t0:.1f}s)")
    return graph


def _write_parts(plan: DataPlan, graph, before: dict) -> tuple[Path, dict]:
    """Build (or find) the parts in the partition cache; ``before`` gets the memory estimate made before
    partitioning, when the parts must be built."""

    def check_memory() -> None:  # only when the parts must be built: the launcher's METIS peak, the ranks' floor
        before.update(check_before_partitioning(plan.resources, graph, plan.nparts, plan.partitioner == "metis"))
        say(
            f"memory estimate: launcher {before['launcher_mib'] / 1024:.1f} GiB while partitioning, "
            f"each rank at least {before['rank_floor_mib'] / 1024:.1f} GiB"
        )

    try:
        return prepare_parts(graph, plan.partitioner, plan.partitioner_seed, plan.nparts, plan.parts_root, check_memory)
    except OSError as exc:  # a read-only or full data root, or a file in its place
        check_writable(plan.parts_root, plan.root_key)  # names a file in the way, or a root where nothing can be made
        raise CacheError(
            f"{plan.root_key}: cannot write the partition cache under {plan.parts_root} ({describe_os_error(exc)}); "
            f"set {plan.root_key} to a writable directory (complete data and parts are read without writing)"
        ) from None


def _describe(plan: DataPlan, graph, meta: dict) -> None:
    method = plan.resources.method
    if method.shared_part:
        kept = {"block": "a block of layers", "one": "one layer", "all": "every layer"}[method.kept_layers]
        say(f"{plan.method_name}: each of {plan.resources.ranks} rank(s) holds the whole {graph.name} input and {kept}")
    else:
        cut = meta["edge_cut"] / max(1, meta["num_edges"])
        say(f"{plan.nparts} parts ({plan.partitioner}): edge cut {cut:.1%}, halo nodes per part {meta['halo_nodes']}")


def _cached_summary(plan: DataPlan) -> tuple[GraphSummary, Path, dict] | None:
    """(the dataset's summary, its parts' cache entry, their metadata) when both are kept and its files are
    unchanged since they were made; None: load it."""
    key = plan.recipe()
    summary = read_summary(plan.parts_root, key) if key else None
    if summary is None or plan.nparts > summary.num_nodes:
        return None
    found = cached_parts(
        summary.content, plan.partitioner, plan.partitioner_seed, plan.nparts, plan.parts_root, quiet=True
    )
    return None if found is None else (summary, *found)


def _load_and_summarize(plan: DataPlan):
    """Load the dataset; keep its summary for the next run of it (gnnq.data.summary)."""
    notes: list[str] = []
    graph = load_dataset(plan.dataset, notes)
    key = plan.recipe()
    if key:
        summary = GraphSummary(
            graph.name,
            graph.num_nodes,
            graph.num_edges,
            graph.num_features,
            graph.num_classes,
            bool(graph.multilabel),
            graph.fingerprint(),
            graph_mib(graph),
            notes,
            graph.feature_nonzeros,
        )
        write_summary(plan.parts_root, key, summary)
    return graph
