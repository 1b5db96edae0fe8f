"""Atomic file writes (a reader sees the old file or the whole new one, never a part) and strict JSON."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

import numpy as np


def write_text_atomic(path: Path, text: str) -> None:
    write_atomic(path, lambda f: f.write(text.encode()))


def write_torch_atomic(path: Path, obj) -> None:
    import torch  # here: the launcher writes JSON and text without importing torch

    write_atomic(path, lambda f: torch.save(obj, f))


def write_numpy_atomic(path: Path, array: np.ndarray) -> None:
    write_atomic(path, lambda f: np.save(f, array, allow_pickle=False))


def write_bytes_atomic(path: Path, payload: bytes) -> None:
    write_atomic(path, lambda f: f.write(payload))


def write_atomic(path: Path, write) -> None:
    """``write(f)`` into a temporary file beside ``path``, then renamed over it; the temporary file is removed on
    any error or interrupt. An OSError names ``path`` (not the temporary file) as its filename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise _naming(exc, path) from None
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp creates 0600; records are meant to be shared
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _naming(exc, path) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _naming(exc: OSError, path: Path) -> OSError:
    """``exc`` with ``path`` as its filename where it names none or a temporary file of ours."""
    if exc.filename is None or Path(exc.filename).name.startswith(f".{path.name}."):
        exc.filename = str(path)
    return exc


def json_safe(obj):
    """``obj`` with every non-finite float (NaN, inf; numpy's too) replaced by None, in nested dicts, lists and
    tuples."""
    if isinstance(obj, (float, np.floating)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def strict_json(obj, **kwargs) -> str:
    """JSON any parser reads: non-finite floats become null (never bare NaN/Infinity); other objects str()."""
    return json.dumps(json_safe(obj), allow_nan=False, default=str, **kwargs)


def write_json_atomic(path: Path, obj) -> None:
    write_text_atomic(path, strict_json(obj, indent=2) + "\n")
