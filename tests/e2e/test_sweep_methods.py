"""A sweep that mixes methods at a short length (issue 32 item 1): AdaQP's default assign cycle follows the run's
length (said once, recorded in the config), and ``++quantizer.<key>`` sets a method's key only in the points whose
quantizer has it."""

from __future__ import annotations

from tests.cli_helpers import read_metrics, read_record, run_dirs, run_gnnq

SWEEP = [
    "-m",
    "logger=none",
    "dataset.num_nodes=600",
    "model.hidden=16",
    "trainer.epochs=5",
    "experiment=adaqp_vanilla,adaqp",
    "++quantizer.group_size=20",
    "++quantizer.profile_repeats=1",
]


def test_a_mixed_sweep_with_a_short_adaqp_point_runs(tmp_path):
    res = run_gnnq(SWEEP, tmp_path, tmp_path / "data", timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    records = {read_record(d)["config"]["quantizer"]["name"]: (d, read_record(d)) for d in run_dirs(tmp_path)}
    assert sorted(records) == ["adaptive", "fp32"] and all(r["status"] == "ok" for _, r in records.values())
    assert records["fp32"][1]["config"]["quantizer"] == {"name": "fp32"}  # the ++ keys left out there
    adaptive = records["adaptive"][1]["config"]["quantizer"]
    assert (adaptive["assign_cycle"], adaptive["group_size"], adaptive["profile_repeats"]) == (1, 20, 1)
    assigned = [r["epoch"] for r in read_metrics(records["adaptive"][0]) if "assignment" in r]
    assert assigned == [2, 3, 4, 5]  # 5 epochs // 4 = a cycle of 1: reassigned before every epoch after the first
    assert "quantizer.assign_cycle=1: the default, a quarter of trainer.epochs=5" in res.stdout
    assert "++quantizer.group_size=20 not set: quantizer=fp32 has no such key" in res.stdout
