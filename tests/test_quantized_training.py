"""Training with quantized halo messages on real graphs: 8- and 4-bit stay within 0.5 points of fp32.

2- and 1-bit accuracies are reported by ``python -m gnnq.bench.quantized_messages`` (results/), not asserted.
"""

from __future__ import annotations

import json
import statistics

import pytest

from tests.cli_helpers import read_record, run_dirs, run_gnnq

SEEDS = "0,1,2"
COMMON = ["logger=none", "cluster.nproc=4", "model.layers=2", "model.hidden=64", "model.norm=none",
          "trainer.weight_decay=0.0005", "trainer.epochs=150"]  # fmt: skip


def _mean_test(runs_dir) -> dict[int, float]:
    by_bits: dict[int, list[float]] = {}
    for d in run_dirs(runs_dir):
        rec = read_record(d)
        assert rec["status"] == "ok", rec["error"]
        by_bits.setdefault(rec["config"]["quantizer"]["bits"], []).append(rec["test"])
    assert all(len(v) == 3 for v in by_bits.values()), by_bits
    return {b: statistics.mean(v) for b, v in by_bits.items()}


@pytest.mark.parametrize("dataset", ["cora", "citeseer"])
@pytest.mark.parametrize("model", ["gcn", "sage"])
def test_quantized_accuracy_close_to_fp32(tmp_path, planetoid_root, dataset, model):
    base = [f"dataset={dataset}", f"model={model}", *COMMON, f"trainer.seed={SEEDS}"]
    assert run_gnnq(["-m", *base], tmp_path / "fp32", planetoid_root, timeout=900).returncode == 0
    res = run_gnnq(["-m", *base, "quantizer=uniform", "quantizer.bits=8,4"], tmp_path / "q", planetoid_root, timeout=1800)
    assert res.returncode == 0, res.stderr
    acc = {**_mean_test(tmp_path / "fp32"), **_mean_test(tmp_path / "q")}
    print(f"QUANT_ACCURACY {json.dumps({'dataset': dataset, 'model': model, 'mean_test': acc})}")
    for bits in (8, 4):
        assert acc[bits] >= acc[32] - 0.005, f"{dataset} {model}: {bits}-bit {acc[bits]:.4f} vs fp32 {acc[32]:.4f}"
