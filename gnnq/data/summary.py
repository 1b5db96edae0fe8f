"""What the launcher needs of a dataset (sizes, content fingerprint, sanity notes), kept so that a run whose parts
are cached starts without loading the dataset, nor importing torch or PyG for it.

After each load the launcher writes ``<data root>/parts/graphs/<recipe>.json``. The recipe hashes the dataset's
config and the path, size and modification time of every file its loader reads (``dataset_sources`` in
gnnq.data.registry); a loader whose files are not known there is always loaded. A later run with the same
recipe reads the summary instead; its fingerprint keys the partition cache (gnnq.data.part_cache), whose entry
is checked against its checksums as before. A changed, added or removed file changes the recipe, so the
dataset is loaded (and checked) again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

FORMAT_VERSION = 2  # 2: feature_nonzeros
SUMMARY_DIR = "graphs"  # under the partition cache root


@dataclass
class GraphSummary:
    """A loaded graph's sizes and fingerprint: what prepare_data reads of it when its parts are cached."""

    name: str
    num_nodes: int
    num_edges: int
    num_features: int
    num_classes: int
    multilabel: bool
    content: str  # Graph.fingerprint()
    mib: float  # what the loaded graph holds (gnnq.launch.partition_memory.graph_mib)
    notes: list[str] = field(default_factory=list)  # the sanity check's warnings, said again on every run
    feature_nonzeros: int | None = None  # Graph.feature_nonzeros: sparse features' stored entries, None if dense

    def fingerprint(self) -> str:
        return self.content


def recipe(dataset_cfg: dict, sources: list[Path]) -> str:
    """The hash of a dataset's config and the files it is read from (each file's path, size and mtime)."""
    files = []
    for src in sorted(Path(s) for s in sources):
        for path in _files(src):
            try:
                st = path.stat()
                files.append([str(path), st.st_size, st.st_mtime_ns])
            except OSError:
                files.append([str(path), None, None])
    ident = json.dumps({"config": dataset_cfg, "files": files, "format": FORMAT_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(ident.encode()).hexdigest()[:24]


def _files(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    if not src.is_dir():
        return [src]  # missing: part of the recipe as such
    found = []
    for folder, dirs, names in os.walk(src):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # lock files and temporary folders aside
        found += [Path(folder) / n for n in sorted(names) if not n.startswith(".")]
    return found


def read_summary(root: Path, key: str) -> GraphSummary | None:
    """The summary kept for recipe ``key`` under the cache ``root``; None when there is none or it is unreadable."""
    try:
        data = json.loads((Path(root) / SUMMARY_DIR / f"{key}.json").read_text())
        return GraphSummary(**data)
    except (OSError, ValueError, TypeError):
        return None


def write_summary(root: Path, key: str, summary: GraphSummary) -> None:
    """Keep ``summary`` for recipe ``key``; a cache root that cannot be written only costs the next run a load."""
    folder = Path(root) / SUMMARY_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(asdict(summary)))
        os.replace(tmp, folder / f"{key}.json")
    except OSError:
        pass
