"""Checkpoint and resume through the real command line: a resumed run ends exactly as an uninterrupted one.

Here: the in-process cases (no process started); the others are in `tests/e2e/test_checkpoint.py`.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle

import pytest
import torch

from gnnq.train.checkpoint import CHECKPOINT_DIR, LATEST_FILE, CheckpointError, load_checkpoint


class _Payload:
    def __reduce__(self):
        return (print, ("unpickled code ran",))


def test_checkpoints_load_without_unpickling_code(tmp_path):
    """A rank file whose sha256 matches but which holds a pickled callable is refused by weights_only loading."""
    root = tmp_path / CHECKPOINT_DIR
    (root / "epoch-000001").mkdir(parents=True)
    path = root / "epoch-000001" / "rank0.pt"
    buffer = io.BytesIO()
    torch.save({"loop": _Payload()}, buffer)
    path.write_bytes(buffer.getvalue())
    latest = {
        "format_version": 1,
        "epoch": 1,
        "dir": "epoch-000001",
        "world_size": 1,
        "sha256": [hashlib.sha256(path.read_bytes()).hexdigest()],
        "bytes": [path.stat().st_size],
    }
    (root / LATEST_FILE).write_text(json.dumps(latest))
    with pytest.raises(pickle.UnpicklingError):
        load_checkpoint(tmp_path, 0, 1)
    with pytest.raises(CheckpointError, match="written by 1 ranks; this run has 2"):
        load_checkpoint(tmp_path, 0, 2)
