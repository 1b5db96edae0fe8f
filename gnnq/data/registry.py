"""The dataset registry (``DATASETS``): names, loaders, schemas, data root, cheap node counts and the one ``load_dataset``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from gnnq.config.registry import Choice, Registry
from gnnq.config.schema import DatasetConfig, FilesDatasetConfig, SyntheticDatasetConfig
from gnnq.data.graph import Graph
from gnnq.data.integrity import warn
from gnnq.data.loaders import canonical_edges, one_line
from gnnq.data.loaders import files as files_loader
from gnnq.data.loaders import npz as npz_loader
from gnnq.data.loaders import ogb as ogb_loader
from gnnq.data.loaders import pyg as pyg_loader
from gnnq.data.loaders import synthetic as synthetic_loader
from gnnq.data.sanity import check_graph
from gnnq.errors import DatasetError, GnnqError


@dataclass(frozen=True)
class _Entry:
    load: Callable[[object], Graph]  # cfg -> Graph, before to_undirected / validate
    num_nodes: Callable[[object], Optional[int]]  # cfg -> node count without loading


def _pyg_entry(name: str) -> _Entry:
    spec = pyg_loader.SPECS[name]
    return _Entry(lambda cfg: pyg_loader.load_pyg(name, data_root(cfg), cfg.download), lambda cfg: spec.num_nodes)


def _ogb_entry(name: str) -> _Entry:
    n = ogb_loader.NUM_NODES[name]
    return _Entry(lambda cfg: ogb_loader.load_ogb(name, data_root(cfg), cfg.download), lambda cfg: n)


def _npz_entry(name: str) -> _Entry:
    # the published node count (checks before loading: no more ranks than nodes); the loaded file is checked again
    return _Entry(lambda cfg: npz_loader.load_npz(name, data_root(cfg)), lambda cfg: npz_loader.NUM_NODES[name])


def _load_files(cfg) -> Graph:
    return files_loader.load_files(cfg.path, cfg.train_frac, cfg.val_frac, cfg.seed)


def _load_synthetic(cfg) -> Graph:
    return synthetic_loader.generate_sbm(
        num_nodes=cfg.num_nodes,
        avg_degree=cfg.avg_degree,
        num_classes=cfg.num_classes,
        feature_dim=cfg.feature_dim,
        homophily=cfg.homophily,
        feature_noise=cfg.feature_noise,
        seed=cfg.seed,
        train_frac=cfg.train_frac,
        val_frac=cfg.val_frac,
    )


# The dataset group's registry: every name ``dataset.name`` accepts, its loader (an _Entry) and its schema.
DATASETS = Registry("dataset", [
    *(Choice(name, DatasetConfig, _pyg_entry(name), f"PyG {spec.cls_name}: {spec.num_nodes} nodes")
      for name, spec in pyg_loader.SPECS.items()),
    *(Choice(name, DatasetConfig, _ogb_entry(name), f"OGB: {n} nodes") for name, n in ogb_loader.NUM_NODES.items()),
    *(Choice(name, DatasetConfig, _npz_entry(name), f"PyG {npz_loader.NPZ_FILES[name][0]} npz: {n} nodes; the pdADMM-G authors' split")
      for name, n in npz_loader.NUM_NODES.items()),
    Choice("files", FilesDatasetConfig, _Entry(_load_files, lambda cfg: None), "your own graph from a directory (docs/datasets.md)"),
    Choice("synthetic", SyntheticDatasetConfig, _Entry(_load_synthetic, lambda cfg: int(cfg.num_nodes)),
           "stochastic block model with class-correlated features; no download"),
])  # fmt: skip


def dataset_names() -> list[str]:
    """Every value ``dataset.name`` accepts."""
    return list(DATASETS.names())


def data_root(cfg) -> Path:
    """``dataset.root``, else env ``GNNQ_DATA``, else ``$XDG_CACHE_HOME/gnnq/data`` (~/.cache/gnnq/data)."""
    root = getattr(cfg, "root", None) or os.environ.get("GNNQ_DATA")
    if not root:
        root = Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache") / "gnnq" / "data"
    return Path(root).expanduser()


def data_root_key(cfg) -> str:
    """The setting that moves ``data_root`` (for error lines): ``dataset.root`` if set, else ``GNNQ_DATA``."""
    return "dataset.root" if getattr(cfg, "root", None) else "GNNQ_DATA"


def expected_num_nodes(cfg) -> Optional[int]:
    """The node count of ``cfg``'s dataset without loading it (None when unknown before loading)."""
    return _entry(cfg.name).num_nodes(cfg)


def load_dataset(cfg) -> Graph:
    """Load, optionally symmetrize, and validate the dataset ``cfg`` names; check its content (gnnq.data.sanity).

    Raises DatasetError (ConfigError for impossible generator / split settings) with one line.
    """
    name = cfg.name
    entry = _entry(name)
    try:
        graph = entry.load(cfg)
        if cfg.to_undirected:
            graph.edge_index = canonical_edges(graph.edge_index, graph.num_nodes, undirected=True)
        graph.validate()
        notes = check_graph(graph)
    except GnnqError:
        raise
    except MemoryError:
        raise DatasetError(f"{name}: not enough memory to load it") from None
    except ValueError as exc:  # Graph.validate: the message already names the dataset and field
        raise DatasetError(" ".join(str(exc).split())) from None
    except Exception as exc:
        raise DatasetError(f"{name}: loading failed ({one_line(exc)})") from None
    for note in notes:
        warn(note)
    return graph


def _entry(name: str) -> _Entry:
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}: dataset must be one of {', '.join(DATASETS.names())}")
    return DATASETS.target(name)
