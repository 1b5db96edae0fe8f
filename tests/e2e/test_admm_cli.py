"""pdADMM-G through the real command line: torchrun ranks owning layer blocks, records, bytes."""

from __future__ import annotations

import math

import pytest

from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq

SMALL = ["dataset=cora", "logger=none", "model.layers=4", "model.hidden=32", "trainer.epochs=4"]
ADMM = ["parallel.warmup_iterations=3"]  # a key of parallel=admm only
CORA_TRAIN = 140


@pytest.fixture(scope="module")
def admm_runs(tmp_path_factory, planetoid_root):
    """pdADMM-G on 2 ranks, pdADMM-G-Q (8-bit grid) on 3 ranks, the public code's pdADMM-G-Q (chain
    start, q only on 1000 levels) on 2, and the Adagrad baseline on 2."""
    root = tmp_path_factory.mktemp("admm")
    runs = {
        "g": ["experiment=pdadmm_g", "cluster.nproc=2", *ADMM],
        "q": ["experiment=pdadmm_g_q_gnnq", "cluster.nproc=3", *ADMM],
        "code": [
            "experiment=pdadmm_g_q_code",
            "cluster.nproc=2",
            "parallel.chain_layers=[2,3]",
            "parallel.chain_iterations=[2,1]",
        ],
        "adagrad": ["experiment=gamlp_adagrad", "cluster.nproc=2"],
    }
    out = {}
    for name, args in runs.items():
        res = run_gnnq([*args, *SMALL], root / name, planetoid_root, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        (run_dir,) = run_dirs(root / name)
        out[name] = (read_record(run_dir), read_metrics(run_dir))
    return out


def test_admm_record_and_rows(admm_runs):
    record, rows = admm_runs["g"]
    assert record["status"] == "ok" and record["world_size"] == 2
    assert len(rows) == 4 and all({"objective", "residual", "rho", "train", "val", "test"} <= set(r) for r in rows)
    assert all(r["objective"] > 0 and r["residual"] >= 0 for r in rows)
    assert record["best_val"] == max(r["val"] for r in rows)
    admm = record["summary"]["admm"]
    assert admm["warmup_iterations"] == 3 and admm["grid"] is None
    # gnnq's presets split by estimated cost (layer 1, Cora's 7,165 x 32, outweighs the rest), the q exchange
    # overlapped.
    assert admm["layer_blocks"] == [[1, 1], [2, 4]] and admm["blocks"] == "cost" and admm["overlap_q"] is True


def test_admm_bytes_are_one_p_down_and_one_q_up_per_boundary(admm_runs):
    g, _ = admm_runs["g"]
    q, _ = admm_runs["q"]
    fp32_message = CORA_TRAIN * 32 * 4
    assert g["comm_bytes_per_epoch"] == 1 * 2 * fp32_message  # 2 ranks: one boundary
    grid = q["summary"]["admm"]["grid"]
    assert grid == {"lo": -0.05, "hi": 1.0, "levels": 256, "bits": 8, "quantize_p": True, "quantize_q": True}
    coded_message = math.ceil(CORA_TRAIN * 32 * grid["bits"] / 8)
    assert q["comm_bytes_per_epoch"] == 2 * 2 * coded_message  # 3 ranks: two boundaries
    per_boundary = (q["comm_bytes_per_epoch"] / 2) / (g["comm_bytes_per_epoch"] / 1)
    assert per_boundary == 0.25
    # The fp32 baselines in the summary count the same boundaries: 2 messages each (gnnq), 3 (the public code).
    assert g["summary"]["admm"]["fp32_baseline_bytes_per_iteration"] == {
        "gnnq_fp32": g["comm_bytes_per_epoch"],
        "public_code_fp32": 3 * fp32_message,
    }
    assert q["summary"]["admm"]["fp32_baseline_bytes_per_iteration"] == {
        "gnnq_fp32": 2 * 2 * fp32_message,
        "public_code_fp32": 2 * 3 * fp32_message,
    }


def test_public_code_preset_sends_q_coded_and_p_in_fp32_after_a_chain_start(admm_runs):
    record, rows = admm_runs["code"]
    admm = record["summary"]["admm"]
    assert (
        admm["layer_blocks"] == [[1, 2], [3, 4]] and admm["blocks"] == "layers" and admm["overlap_q"] is False
    )  # as the authors
    assert admm["init"] == "chain" and admm["grid"] == {
        "lo": -1.0,
        "hi": 2.0,
        "levels": 1000,
        "bits": 10,
        "quantize_p": False,
        "quantize_q": True,
    }
    assert record["comm_bytes_per_epoch"] == CORA_TRAIN * 32 * 4 + math.ceil(
        CORA_TRAIN * 32 * 10 / 8
    )  # p fp32 down, q 10-bit up
    assert [r["rho"] for r in rows] == sorted(r["rho"] for r in rows) and rows[0][
        "rho"
    ] == 1e-4  # the paper schedule only grows
    assert record["summary"]["final_test"] == rows[-1]["test"] and record["summary"]["final_val"] == rows[-1]["val"]


def test_gamlp_baseline_runs_data_parallel_without_halo_bytes(admm_runs):
    record, rows = admm_runs["adagrad"]
    assert record["status"] == "ok" and record["world_size"] == 2
    assert record["config"]["trainer"]["optimizer"] == "adagrad" and record["config"]["model"]["name"] == "gamlp"
    assert record["comm_bytes_per_epoch"] == 0
    assert all(r["grad_sync_bytes"] > 0 for r in rows)
