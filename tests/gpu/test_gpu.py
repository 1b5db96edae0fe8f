"""The GPU check's checks as pytest tests: skipped without CUDA (CI has no GPU). On a machine with one,
``pytest tests/gpu`` runs them; ``python -m tests.gpu.check --out DIR`` runs the same checks as one script and
writes their table (results/gpu/)."""

from __future__ import annotations

import pytest
import torch

from tests.gpu.check import (
    check_cli,
    check_codec_bandwidth,
    check_codec_identity,
    check_mixed_layout,
    check_strategies_cuda_equal_cpu,
)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA (a GPU): python -m tests.gpu.check on a machine with one"
)


@pytest.fixture
def cuda() -> torch.device:
    return torch.device("cuda")


def test_triton_codec_equals_the_cpu_codecs_bit_for_bit_on_cuda(cuda):
    result = check_codec_identity(cuda)
    assert result["ok"], result


def test_codec_bandwidth_measures_every_width_and_tilings_keep_the_bytes(cuda):
    result = check_codec_bandwidth(cuda, [16])
    assert result["ok"] and all(r["encode_us"] > 0 and r["decode_us"] > 0 for r in result["table"]), result


def test_mixed_width_layouts_round_trip_within_one_step_per_row(cuda):
    result = check_mixed_layout(cuda)
    assert result["ok"], result


def test_strategies_and_published_presets_on_cuda_equal_the_cpu(cuda):
    result = check_strategies_cuda_equal_cpu(cuda)
    assert result["ok"], result


def test_gnnq_on_cuda_with_nccl_and_with_gloo_sharing_the_gpu(cuda):
    result = check_cli(cuda)
    assert result["ok"], result
