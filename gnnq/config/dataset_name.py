"""What a run calls its graph: the dataset's name, except for ``dataset=files``, where every graph shares the
loader's name ``files``: there it is ``dataset.graph_name``, else the folder's name (``dataset.path=/data/road``:
``road``). Run dirs, W&B names and report headings use it; reports also key a ``files`` graph by its content
fingerprint (record.json's ``dataset_fingerprint``), so that two graphs never share a leaderboard."""

from __future__ import annotations

import os
import re

FILES = "files"
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")


def graph_name(dataset) -> str:
    """``dataset``: the composed ``dataset`` node (DictConfig or the record's dict)."""
    get = dataset.get
    name = str(get("name") or "?")
    if name != FILES:
        return name
    given = get("graph_name")
    if given:
        return str(given)
    path = get("path")
    folder = os.path.basename(os.path.normpath(os.path.abspath(os.path.expanduser(str(path))))) if path else ""
    return folder or FILES


def safe_graph_name(dataset) -> str:
    """``graph_name`` as one path component (run-dir names)."""
    return _UNSAFE.sub("_", graph_name(dataset)).strip("_") or FILES
