"""gnnq-bench tune's bookkeeping of what it could not make: a failed rerun or tuning is one line naming the method,
dataset, setting and the error; every missing row is listed at the end and in DIR/missing_rows.txt; a trial config
gnnq refuses is a FAIL for Optuna with its reason, never a score."""

from __future__ import annotations

import pytest

from gnnq.bench.tune import FailedTrial, objective, trial_refusal
from gnnq.bench.tune_failures import MISSING_FILE, MissingRow, error_line, report_missing
from gnnq.config.compose import compose_config, resolve_sweep


def test_the_error_line_is_the_first_gnnq_error_else_the_last_line():
    stderr = [
        "some warning\n",
        "gnnq: error: quantizer.assign_cycle=50 is not allowed with trainer.epochs=30\n",
        "gnnq: error: a later consequence\n",
        "gnnq: 2 of 3 runs failed: a, b\n",
    ]
    assert error_line(stderr) == "gnnq: error: quantizer.assign_cycle=50 is not allowed with trainer.epochs=30"
    assert error_line(["Traceback\n", "RuntimeError: boom\n", "\n"]) == "RuntimeError: boom"
    assert error_line([]) == "no error line on stderr"


def test_a_missing_row_names_method_dataset_setting_and_error():
    rerun = MissingRow("adaqp", "cora", "tuned", ("quantizer.assign_cycle=50",), 2, "gnnq: error: refused")
    assert rerun.line() == (
        "adaqp on cora, tuned (quantizer.assign_cycle=50) setting: rerun failed with exit code 2: gnnq: error: refused"
    )
    never = MissingRow("sancus", "cora", "tuned", (), None, "tuning cora-sancus: no trial completed")
    assert never.line() == "sancus on cora, tuned setting: not rerun: tuning cora-sancus: no trial completed"


def test_missing_rows_are_reported_and_written_then_cleared_when_none(tmp_path):
    rows = [
        MissingRow("adaqp", "cora", "tuned", ("quantizer.assign_cycle=50",), 2, "gnnq: error: refused"),
        MissingRow("bnsgcn", "reddit-like", "default", (), 1, "gnnq: error: rank 1 died"),
    ]
    lines = report_missing(rows, tmp_path)
    assert lines[0].startswith("gnnq-bench tune: 2 leaderboard row(s) missing")
    assert lines[1:] == [f"  - {r.line()}" for r in rows]
    assert (tmp_path / MISSING_FILE).read_text().splitlines() == lines
    assert report_missing([], tmp_path) == [] and not (tmp_path / MISSING_FILE).exists()  # a later clean run


def test_a_failed_trial_cannot_be_scored_and_carries_its_reason(tmp_path):
    value = objective(tmp_path, {"status": "failed", "error": "rank 0 ran out of memory"}, 0.8)
    assert isinstance(value, FailedTrial)
    # Hydra's Optuna sweeper does float(return value); failing there is how it tells Optuna FAIL and keeps going
    with pytest.raises(ValueError, match="rank 0 ran out of memory"):
        float(value)
    assert "rank 0 ran out of memory" in str(value)


def test_a_trial_config_gnnq_refuses_is_named_before_it_runs():
    """AdaQP's best trial once picked assign_cycle=50 for a 30-epoch budget: gnnq refuses it, so must the tuning."""
    sweep = resolve_sweep("tuned_leaderboard")
    overrides = ["experiment=adaqp", "dataset=cora", "trainer.epochs=30"]
    bad = compose_config([*overrides, "quantizer.assign_cycle=50"], sweep[1], sweep[0], check=False)
    reason = trial_refusal(bad)
    assert reason is not None and "quantizer.assign_cycle=50" in reason and "trainer.epochs=30" in reason
    good = compose_config([*overrides, "quantizer.assign_cycle=10"], sweep[1], sweep[0], check=False)
    assert trial_refusal(good) is None
