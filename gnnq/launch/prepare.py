"""The launcher's "prepare data" step: the dataset (loaded, or its kept summary when its parts are cached), the
checks that need it, the GA-MLP inputs, and the partition cache entry the ranks read; before any rank starts.

``prepare_data(cfg)`` reads (``_read_graph``), checks and computes (``_check_graph``, ``_propagate``), writes the
parts (``_write_parts``) and says what it did (``_describe``), each a step of its own."""

from __future__ import annotations

import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnq.config.clusters import world_size
from gnnq.config.dataset_name import FILES, graph_name
from gnnq.data.integrity import warn
from gnnq.data.part_cache import cached_parts, prepare_parts
from gnnq.data.registry import data_root, data_root_key, dataset_sources, load_dataset
from gnnq.data.summary import GraphSummary, read_summary, recipe, write_summary
from gnnq.errors import CacheError, ConfigError, describe_os_error
from gnnq.launch.console import say
from gnnq.launch.partition_memory import check_before_partitioning, graph_mib
from gnnq.launch.resources import check_launch_resources, feature_row_bytes, method_resources
from gnnq.launch.run_dir import check_writable


def prepare_data(cfg: DictConfig) -> tuple[Path, dict]:
    """Load the dataset and build (or reuse) its cached parts, before any rank starts: (parts dir, their metadata
    with the memory estimates and, for a files graph, its fingerprint)."""
    declared = method_resources(cfg)
    method = declared["parallel"]
    graph, graph_mib_, cached = _read_graph(cfg, declared)
    _check_graph(cfg, graph, method)
    fingerprint = {"dataset_fingerprint": graph.fingerprint()} if cfg.dataset.name == FILES else {}
    if declared["model"].propagated_inputs:
        graph = _propagate(cfg, graph)
    nparts = 1 if method.shared_part else world_size(cfg)  # layer-parallel ADMM: every rank reads the whole graph
    before: dict = {}
    parts_dir, meta = cached[1:] if cached is not None else _write_parts(cfg, graph, nparts, before)
    meta = {
        **meta,
        **fingerprint,
        "memory_estimate_mib_per_rank": check_launch_resources(
            cfg, meta, graph.num_features, graph_mib_, graph.num_classes, _feature_bytes(graph)
        ),
    }
    if before:
        meta["memory_estimate_launcher_mib"] = before["launcher_mib"]
    _describe(cfg, graph, method, nparts, meta)
    return parts_dir, meta


def _feature_bytes(graph) -> float | None:
    """One node's input features in a rank (bytes) when they are sparse; None for dense ones (the graph or its
    kept summary)."""
    return feature_row_bytes(graph.num_features, graph.feature_nonzeros, graph.num_nodes)


def _read_graph(cfg: DictConfig, declared: dict):
    """(the graph or its kept summary, its MiB, (summary, parts dir, meta) when the parts are cached, else None);
    ConfigError when the run has more partitions than the graph has nodes."""
    t0 = time.perf_counter()
    cached = None if declared["model"].propagated_inputs else _cached_summary(cfg, declared["parallel"].shared_part)
    if cached is not None:  # its parts are cached and its files unchanged: no load (gnnq.data.summary)
        graph = cached[0]
        for note in graph.notes:
            warn(note)
        mib = graph.mib
    else:
        graph = _load_and_summarize(cfg)
        mib = graph_mib(graph)
    nparts = world_size(cfg)
    if nparts > graph.num_nodes:
        raise ConfigError(
            f"cluster.nproc x cluster.hosts = {nparts} partitions, but dataset {graph.name} has only "
            f"{graph.num_nodes} nodes"
        )
    say(
        f"dataset {graph_name(cfg.dataset)}: {graph.num_nodes:,} nodes, {graph.num_edges:,} edges, "
        f"{graph.num_features} features, {graph.num_classes} classes ({time.perf_counter() - t0:.1f}s)"
    )
    return graph, mib, cached


def _check_graph(cfg: DictConfig, graph, method) -> None:
    """Single-label methods on single-label data (the partition count: ``_read_graph``)."""
    if method.single_label and graph.multilabel:
        raise ConfigError(
            f"parallel={cfg.parallel.name} trains single-label classification; dataset {graph.name} is multi-label"
        )


def _propagate(cfg: DictConfig, graph):
    """The GA-MLP's inputs [X, AX, ..., A^hops X], computed once and cached (gnnq.data.gamlp)."""
    from gnnq.data.gamlp import gamlp_graph

    t0 = time.perf_counter()
    graph = gamlp_graph(graph, cfg.model.hops, data_root(cfg.dataset) / "gamlp")
    say(
        f"GA-MLP inputs [X, AX, ..., A^{cfg.model.hops}X]: {graph.num_features} features "
        f"({time.perf_counter() - t0:.1f}s)"
    )
    return graph


def _write_parts(cfg: DictConfig, graph, nparts: int, before: dict) -> tuple[Path, dict]:
    """Build (or find) the parts in the partition cache; ``before`` gets the memory estimate made before
    partitioning, when the parts must be built."""
    parts_root = data_root(cfg.dataset) / "parts"

    def check_memory() -> None:  # only when the parts must be built: the launcher's METIS peak, the ranks' floor
        before.update(check_before_partitioning(cfg, graph, nparts))
        say(
            f"memory estimate: launcher {before['launcher_mib'] / 1024:.1f} GiB while partitioning, "
            f"each rank at least {before['rank_floor_mib'] / 1024:.1f} GiB"
        )

    try:
        return prepare_parts(graph, cfg.partitioner.name, cfg.partitioner.seed, nparts, parts_root, check_memory)
    except OSError as exc:  # a read-only or full data root, or a file in its place
        key = data_root_key(cfg.dataset)
        check_writable(parts_root, key)  # names a file in the way, or a root where nothing can be created
        raise CacheError(
            f"{key}: cannot write the partition cache under {parts_root} ({describe_os_error(exc)}); "
            f"set {key} to a writable directory (complete data and parts are read without writing)"
        ) from None


def _describe(cfg: DictConfig, graph, method, nparts: int, meta: dict) -> None:
    if method.shared_part:
        kept = {"block": "a block of layers", "one": "one layer", "all": "every layer"}[method.kept_layers]
        say(f"{cfg.parallel.name}: each of {world_size(cfg)} rank(s) holds the whole {graph.name} input and {kept}")
    else:
        cut = meta["edge_cut"] / max(1, meta["num_edges"])
        say(f"{nparts} parts ({cfg.partitioner.name}): edge cut {cut:.1%}, halo nodes per part {meta['halo_nodes']}")


def _recipe(cfg: DictConfig) -> str | None:
    sources = dataset_sources(cfg.dataset)
    if sources is None:
        return None
    return recipe(OmegaConf.to_container(cfg.dataset, resolve=True), sources)


def _cached_summary(cfg: DictConfig, shared_part: bool) -> tuple[GraphSummary, Path, dict] | None:
    """(the dataset's summary, its parts' cache entry, their metadata) when both are kept and its files are
    unchanged since they were made; None: load it."""
    nparts, parts_root = (1 if shared_part else world_size(cfg)), data_root(cfg.dataset) / "parts"
    key = _recipe(cfg)
    summary = read_summary(parts_root, key) if key else None
    if summary is None or nparts > summary.num_nodes:
        return None
    found = cached_parts(summary.content, cfg.partitioner.name, cfg.partitioner.seed, nparts, parts_root, quiet=True)
    return None if found is None else (summary, *found)


def _load_and_summarize(cfg: DictConfig):
    """Load the dataset; keep its summary for the next run of it (gnnq.data.summary)."""
    notes: list[str] = []
    graph = load_dataset(cfg.dataset, notes)
    key = _recipe(cfg)
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
        write_summary(data_root(cfg.dataset) / "parts", key, summary)
    return graph
