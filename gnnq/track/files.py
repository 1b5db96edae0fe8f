"""Atomic file writes: a reader sees the old file or the whole new one, never a part."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np
import torch


def write_text_atomic(path: Path, text: str) -> None:
    _write_atomic(path, lambda f: f.write(text.encode()))


def write_torch_atomic(path: Path, obj) -> None:
    _write_atomic(path, lambda f: torch.save(obj, f))


def write_numpy_atomic(path: Path, array: np.ndarray) -> None:
    _write_atomic(path, lambda f: np.save(f, array, allow_pickle=False))


def _write_atomic(path: Path, write) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp creates 0600; records are meant to be shared
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, default=str) + "\n")
