"""benchmarks.admm's byte comparison reads pdADMM-G records per dataset and message kind; its per-run
lines read each run's record and metrics."""

from __future__ import annotations

import json

from benchmarks.admm import byte_rows, run_rows
from gnnq.admm.links import fp32_baselines
from gnnq.admm.partition import layer_blocks

ROWS, DIMS = 140, [7165] + [500] * 9 + [7]
BASE = fp32_baselines(DIMS, layer_blocks(10, 2), ROWS)


def _record(
    quantizer: dict,
    seed: int,
    nbytes: int,
    test: float,
    final: float,
    status: str = "ok",
    dataset: str = "cora",
    nproc: int = 2,
) -> dict:
    config = {
        "dataset": {"name": dataset},
        "parallel": {"name": "admm", "init": "chain"},
        "quantizer": quantizer,
        "trainer": {"seed": seed},
        "cluster": {"nproc": nproc},
    }
    summary = {"final_test": final, "admm": {"fp32_baseline_bytes_per_iteration": BASE}}
    return {"status": status, "config": config, "comm_bytes_per_epoch": nbytes, "test": test, "summary": summary}


FP32 = {"name": "fp32"}
PAPER = {"name": "grid", "grid_min": -1.0, "grid_max": 20.0, "grid_levels": 22, "quantize_p": True, "quantize_q": True}
CODE = {"name": "grid", "grid_min": -1.0, "grid_max": 2.0, "grid_levels": 1000, "quantize_p": False, "quantize_q": True}


def test_byte_rows_save_against_both_baselines_and_skip_failed_runs():
    assert BASE == {"gnnq_fp32": 2 * ROWS * 500 * 4, "public_code_fp32": 3 * ROWS * 500 * 4}
    records = [
        _record(FP32, 0, 560_000, 0.770, 0.780),
        _record(FP32, 1, 560_000, 0.766, 0.770),
        _record(PAPER, 0, 2 * 43_750, 0.5, 0.52),
        _record(PAPER, 1, 1, 0.0, 0.0, status="failed"),
        _record(CODE, 0, 280_000 + 87_500, 0.77, 0.78),
        _record(FP32, 2, 0, 0.9, 0.9, nproc=1),
    ]
    rows = {r["messages"]: r for r in byte_rows(records)}
    assert set(rows) == {"fp32", "p and q on 22 levels in [-1, 20]", "q on 1000 levels in [-1, 2]"}
    fp32, paper, code = rows["fp32"], rows["p and q on 22 levels in [-1, 20]"], rows["q on 1000 levels in [-1, 2]"]
    assert (
        fp32["runs"] == 2
        and fp32["saved vs gnnq fp32 (2 msgs)"] == "0.0%"
        and fp32["saved vs public code fp32 (3 msgs)"] == "33.3%"
    )
    assert fp32["test (best val)"] == "0.7680" and fp32["test (final)"] == "0.7750"
    assert (
        paper["runs"] == 1
        and paper["saved vs gnnq fp32 (2 msgs)"] == "84.4%"
        and paper["saved vs public code fp32 (3 msgs)"] == "89.6%"
    )
    assert code["saved vs gnnq fp32 (2 msgs)"] == "34.4%" and code["saved vs public code fp32 (3 msgs)"] == "56.2%"


def test_coverage_says_no_data_where_the_files_are_absent(tmp_path):
    from benchmarks.admm import TABLE4_FILES, coverage_rows

    (tmp_path / TABLE4_FILES["cora"]).parent.mkdir(parents=True)
    (tmp_path / TABLE4_FILES["cora"]).write_bytes(b"")
    records = [_record(FP32, 0, 1, 0.7, 0.7), _record(FP32, 1, 1, 0.7, 0.7, status="failed")]
    rows = {r["dataset"]: r["runs"] for r in coverage_rows(tmp_path, records)}
    assert len(rows) == 9 and rows["cora"] == 1
    assert rows["citeseer"] == rows["coauthor-physics"] == rows["ogbn-arxiv"] == "no data"


def test_run_rows_read_the_final_best_val_and_peak_test_of_each_run(tmp_path):
    for seed, tests in ((0, [0.70, 0.79, 0.77]), (1, [0.60, 0.75, 0.76])):
        run = tmp_path / f"run{seed}"
        run.mkdir()
        rec = _record(PAPER, seed, 87_500, test=tests[1], final=tests[-1])
        rec["summary"]["best_epoch"] = 2
        (run / "record.json").write_text(json.dumps(rec))
        rows = [{"epoch": i + 1, "test": t, "rho": 1e-4 * 10**i} for i, t in enumerate(tests)] + [
            {"epoch": 4, "test": None, "rho": 1e-1}
        ]
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    first, second = run_rows([tmp_path / "run1", tmp_path / "run0"])
    assert (first["seed"], second["seed"]) == (0, 1)
    assert first["messages"] == "p and q on 22 levels in [-1, 20]" and first["iterations done"] == 4
    assert (first["test final"], first["test best-val"], first["best-val iteration"], first["peak test"]) == (
        0.77,
        0.79,
        2,
        0.79,
    )
    assert second["peak test"] == 0.76 and second["final rho"] == 0.1
