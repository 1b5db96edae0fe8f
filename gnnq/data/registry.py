"""The dataset loaders behind the registry ``gnnq.config.registry.DATASETS``: data root, cheap node counts and the one
``load_dataset``.

The registry names each dataset's loader family here by "module:attribute" (``gnnq.data.registry:PYG``); a family
loads any of its names (``cfg.name``) and knows their node counts without loading.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from gnnq.config.registry import DATASETS
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
class Loader:
    """A family of datasets: ``names`` it loads, ``load`` (cfg -> Graph, before to_undirected / validate) and
    ``num_nodes`` (cfg -> node count without loading; None when unknown before loading)."""

    names: tuple[str, ...]
    load: Callable[[object], Graph]
    num_nodes: Callable[[object], Optional[int]]
    about: Callable[[str], str]  # the registry's one line for a name (tests/test_datasets.py compares them)
    # cfg -> the files and folders the loader reads (gnnq.data.summary); None: not known, always load
    sources: Callable[[object], Optional[list[Path]]] = lambda cfg: None


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


PYG = Loader(
    tuple(pyg_loader.SPECS),
    lambda cfg: pyg_loader.load_pyg(cfg.name, data_root(cfg), cfg.download),
    lambda cfg: pyg_loader.SPECS[cfg.name].num_nodes,
    lambda name: f"PyG {pyg_loader.SPECS[name].cls_name}: {pyg_loader.SPECS[name].num_nodes} nodes",
    lambda cfg: [data_root(cfg) / pyg_loader.SPECS[cfg.name].dir_name],
)
OGB = Loader(
    ogb_loader.NAMES,
    lambda cfg: ogb_loader.load_ogb(cfg.name, data_root(cfg), cfg.download),
    lambda cfg: ogb_loader.NUM_NODES[cfg.name],
    lambda name: f"OGB: {ogb_loader.NUM_NODES[name]} nodes",
)
NPZ_SPLIT = "the pdADMM-G authors' split"

# The published node count (checks before loading: no more ranks than nodes); the loaded file is checked again.
NPZ = Loader(
    tuple(npz_loader.NPZ_FILES),
    lambda cfg: npz_loader.load_npz(cfg.name, data_root(cfg)),
    lambda cfg: npz_loader.NUM_NODES[cfg.name],
    lambda name: f"PyG {npz_loader.NPZ_FILES[name][0]} npz: {npz_loader.NUM_NODES[name]} nodes; {NPZ_SPLIT}",
    lambda cfg: [npz_loader.npz_path(cfg.name, data_root(cfg))],
)
FILES = Loader(
    ("files",),
    lambda cfg: files_loader.load_files(cfg.path, cfg.train_frac, cfg.val_frac, cfg.seed),
    lambda cfg: None,
    lambda name: "your own graph from a directory (docs/datasets.md)",
    lambda cfg: [Path(cfg.path).expanduser()],
)
SYNTHETIC = Loader(
    ("synthetic",),
    _load_synthetic,
    lambda cfg: int(cfg.num_nodes),
    lambda name: "stochastic block model with class-correlated features; no download",
    lambda cfg: [],  # made from its config alone
)


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


def dataset_sources(cfg) -> Optional[list[Path]]:
    """The files and folders ``cfg``'s dataset is read from; None when its loader does not say (gnnq.data.summary)."""
    return _entry(cfg.name).sources(cfg)


def load_dataset(cfg, notes: Optional[list[str]] = None) -> Graph:
    """Load, optionally symmetrize, and validate the dataset ``cfg`` names; check its content (gnnq.data.sanity).
    The check's warnings are printed, and added to ``notes`` when given.

    Raises DatasetError (ConfigError for impossible generator / split settings) with one line.
    """
    name = cfg.name
    entry = _entry(name)
    try:
        graph = entry.load(cfg)
        if cfg.to_undirected:
            graph.edge_index = canonical_edges(graph.edge_index, graph.num_nodes, undirected=True)
        graph.validate()
        found = check_graph(graph)
    except GnnqError:
        raise
    except MemoryError:
        raise DatasetError(f"{name}: not enough memory to load it") from None
    except ValueError as exc:  # Graph.validate: the message already names the dataset and field
        raise DatasetError(" ".join(str(exc).split())) from None
    except Exception as exc:
        raise DatasetError(f"{name}: loading failed ({one_line(exc)})") from None
    for note in found:
        warn(note)
    if notes is not None:
        notes += found
    return graph


def _entry(name: str) -> Loader:
    if name not in DATASETS:
        raise DatasetError(f"unknown dataset {name!r}: dataset must be one of {', '.join(DATASETS.names())}")
    return DATASETS.target(name)
