"""The GPU check's checks as pytest tests: skipped without CUDA (CI has no GPU). On a machine with one,
``pytest tests/gpu`` runs them; ``python -m tests.gpu.check --out DIR`` runs the same checks as one script and
writes their table (results/gpu_check/)."""

from __future__ import annotations

import pytest
import torch

from tests.gpu.check import (
    check_cli,
    check_codec_identity,
    check_codec_throughput,
    check_mixed_layout,
    check_overlap_equals_sync,
)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA (a GPU): python -m tests.gpu.check on a machine with one"
)


@pytest.fixture
def cuda() -> torch.device:
    return torch.device("cuda")


def test_triton_codec_equals_torch_codec_bit_for_bit_on_cuda(cuda):
    result = check_codec_identity(cuda)
    assert result["ok"], result


def test_codec_throughput_measures_every_width(cuda):
    result = check_codec_throughput(cuda, rows=65536, dim=256)
    assert result["ok"] and all(v > 0 for k, v in result.items() if k.endswith("_s")), result


def test_mixed_width_layouts_round_trip_within_one_step_per_row(cuda):
    result = check_mixed_layout(cuda)
    assert result["ok"], result


def test_overlap_stale_and_sampling_equal_sync_on_one_shared_gpu(cuda):
    result = check_overlap_equals_sync(cuda)
    assert result["ok"], result


def test_gnnq_on_cuda_finishes_with_the_triton_backend(cuda):
    result = check_cli(cuda)
    assert result["ok"], result
