"""benchmarks.profile_fit: message sizes per width and the fit error it reports."""

from __future__ import annotations

import pytest
import torch

from benchmarks.profile_fit import RANGES, WIDTHS, message_sizes, summarize
from gnnq.comm.kernels.torch_codec import row_bytes


def test_message_sizes_take_the_larger_direction_and_every_width():
    sizes = message_sizes([0, 10, 3], [0, 4, 7], dim=16)
    assert sizes["fp32"] == [0, 10 * 64, 7 * 64]
    for b in WIDTHS:
        assert sizes[b] == [0, 10 * int(row_bytes(16, b, torch.float16)), 7 * int(row_bytes(16, b, torch.float16))]


def test_summarize_reports_r2_and_relative_error_against_the_held_out_median():
    """Channel 1->0: held-out medians 2, 4, 8 ms at 1, 2, 4 kB; fp32's fit predicts double, sent's exactly."""
    fit = {"src": 1, "dst": 0, "c_s": 0.0, "samples": 5}
    fits = {"fp32": [{**fit, "a_s_per_byte": 4e-6, "r2": 0.9}], "sent": [{**fit, "a_s_per_byte": 2e-6, "r2": 0.5}]}
    held = {
        "1->0": [(1000, 2e-3), (1000, 9.0), (1000, 2e-3), (2000, 4e-3), (4000, 8e-3)]
    }  # a stall: the median ignores it
    rows = summarize([[{"fits": fits, "held": held}], [{"fits": {n: [] for n in RANGES}, "held": {}}]])
    by_range = {r["range"]: r for r in rows}
    assert by_range["fp32"]["r2"] == 0.9 and by_range["sent"]["r2"] == 0.5
    for w in WIDTHS:
        assert by_range["fp32"][f"rel_err_{w}"] == pytest.approx(1.0)
        assert by_range["sent"][f"rel_err_{w}"] == pytest.approx(0.0)
    assert [by_range["sent"][f"bytes_{w}"] for w in WIDTHS] == [1000, 2000, 4000]
