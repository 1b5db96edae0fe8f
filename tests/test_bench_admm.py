"""gnnq.bench.admm's byte comparison reads pdADMM-G and -Q records per dataset."""

from __future__ import annotations

from gnnq.bench.admm import byte_rows


def _record(dataset: str, quantizer: str, seed: int, nbytes: int, test: float, status: str = "ok") -> dict:
    config = {"dataset": {"name": dataset}, "parallel": {"name": "admm"}, "quantizer": {"name": quantizer}, "trainer": {"seed": seed}}
    return {"status": status, "config": config, "comm_bytes_per_epoch": nbytes, "test": test}


def test_byte_rows_compare_means_per_dataset_and_skip_failed_runs():
    records = [
        _record("cora", "fp32", 0, 560_000, 0.770), _record("cora", "fp32", 1, 560_000, 0.766),
        _record("cora", "grid", 0, 140_000, 0.769), _record("cora", "grid", 1, 140_000, 0.765),
        _record("cora", "grid", 2, 1, 0.0, status="failed"),
        _record("citeseer", "fp32", 0, 100, 0.7),  # no -Q run: no row
    ]  # fmt: skip
    (row,) = byte_rows(records)
    assert row["dataset"] == "cora" and row["seeds"] == 2
    assert row["bytes saved"] == "75.0%"
    assert row["accuracy cost (points)"] == "+0.10"
