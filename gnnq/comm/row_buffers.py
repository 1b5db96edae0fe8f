"""Buffers of rows kept across epochs, so that receiving or decoding a message writes into memory
that is already there (a fresh tensor of a large message costs its first touch, page by page)."""

from __future__ import annotations

import torch


class RowBuffers:
    """One buffer per key (e.g. a layer), reallocated only when the shape, dtype or device asked for changes."""

    def __init__(self):
        self._buffers: dict = {}

    def get(self, key, rows: int, like: torch.Tensor) -> torch.Tensor:
        """The buffer of ``key``: (``rows``, *``like``'s row shape) of ``like``'s dtype and device. Its contents
        are whatever was last written there; a caller must not hold it across the next call with ``key``."""
        shape = (rows,) + tuple(like.shape[1:])
        buf = self._buffers.get(key)
        if buf is None or tuple(buf.shape) != shape or buf.dtype != like.dtype or buf.device != like.device:
            buf = self._buffers[key] = torch.empty(shape, dtype=like.dtype, device=like.device)
        return buf

    def __len__(self) -> int:
        return len(self._buffers)
