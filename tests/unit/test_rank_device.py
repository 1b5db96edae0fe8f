"""Where a rank computes (``cluster.device``): gnnq.rank.worker.rank_device."""

from __future__ import annotations

import pytest
import torch

from gnnq.rank.worker import rank_device


@pytest.mark.parametrize("backend", ["gloo", "nccl"])
def test_auto_follows_the_backend(backend):
    want = torch.device("cuda", 1) if backend == "nccl" else torch.device("cpu")
    assert rank_device(backend, "auto", 1, 2) == want


def test_gloo_on_cuda_shares_the_gpus_round_robin():
    assert [rank_device("gloo", "cuda", r, 2) for r in range(4)] == [torch.device("cuda", i) for i in (0, 1, 0, 1)]
    assert rank_device("gloo", "cpu", 3, 2) == torch.device("cpu")


def test_nccl_refuses_a_rank_without_a_gpu_of_its_own():
    with pytest.raises(ValueError, match=r"local rank 1 has none of its own \(1 visible\).*cluster.device=cuda"):
        rank_device("nccl", "auto", 1, 1)


def test_cuda_without_a_gpu_is_named():
    with pytest.raises(ValueError, match="cluster.device=cuda with cluster.backend=gloo needs a GPU"):
        rank_device("gloo", "cuda", 0, 0)
