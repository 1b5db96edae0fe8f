"""Sparse CSR feature rows as torch tensors (sparse input features: features.npz)."""

from __future__ import annotations

import warnings

import torch


def csr_tensor(indptr: torch.Tensor, indices: torch.Tensor, values: torch.Tensor, shape) -> torch.Tensor:
    """A CSR tensor of arrays already in canonical form (not re-checked), without torch's beta-state warning."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(indptr, indices, values, shape, check_invariants=False)


def stack_csr(top: torch.Tensor, bottom: torch.Tensor) -> torch.Tensor:
    """[top; bottom] of two CSR tensors with as many columns (torch.cat does not take CSR tensors)."""
    crow = torch.cat([top.crow_indices(), bottom.crow_indices()[1:] + top.crow_indices()[-1]])
    return csr_tensor(
        crow,
        torch.cat([top.col_indices(), bottom.col_indices()]),
        torch.cat([top.values(), bottom.values()]),
        (top.shape[0] + bottom.shape[0], top.shape[1]),
    )
