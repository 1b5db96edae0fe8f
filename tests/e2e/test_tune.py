"""gnnq-bench tune on real runs: Hydra's Optuna sweeper drives gnnq points (warm ranks) over the method's declared
space, the study lives in the sweep directory, and a killed tuning resumes without repeating finished trials."""

from __future__ import annotations

import pytest

from gnnq.bench.tune import Study, finished_trials, tune

pytestmark = pytest.mark.needs_extra("tune")

TINY = ["logger=none", "dataset.num_nodes=1500", "model.hidden=16", "trainer.epochs=3", "cluster.nproc=2"]


def test_a_killed_tuning_resumes_from_its_study_without_repeating_finished_trials(tmp_path, monkeypatch):
    import optuna

    monkeypatch.setenv("GNNQ_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("GNNQ_DATA", str(tmp_path / "data"))
    study = Study("synthetic", "pipegcn", tmp_path / "out", TINY)
    first = tune(study, trials=1, target=0.5, seed=0)
    assert (
        len(first) == 1 and (study.dir / "optuna.db").is_file() and (study.dir / "attempt0-0" / "record.json").is_file()
    )
    (trial,) = first
    assert set(trial.params) == {"trainer.lr", "model.dropout", "trainer.weight_decay", "parallel.momentum"}
    assert trial.value > 0
    # A tuning killed during its next trial leaves that trial running in the study (never told).
    optuna.load_study(study_name=study.name, storage=study.storage).ask()
    second = tune(study, trials=2, target=0.5, seed=0)
    assert len(second) == 2 and second[0].number == trial.number and second[0].params == trial.params
    assert sorted(p.name for p in study.dir.glob("attempt*")) == ["attempt0-0", "attempt1-0"]  # one new run only
    assert len(finished_trials(study)) == 2
    third = tune(study, trials=2, target=0.5, seed=0)  # complete: nothing runs
    assert [t.number for t in third] == [t.number for t in second] and len(list(study.dir.glob("attempt*"))) == 2


def test_refused_trials_fail_in_the_study_with_their_reason_and_nothing_runs(tmp_path, monkeypatch):
    """A trial value gnnq refuses (assign_cycle not below the epoch budget) is Optuna's FAIL, named, never scored;
    the sweep goes on to the next trial."""
    import json

    import optuna

    from gnnq.config import search_space as ss

    monkeypatch.setenv("GNNQ_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("GNNQ_DATA", str(tmp_path / "data"))
    monkeypatch.setitem(ss.QUANTIZER_SPACES, "adaptive", {"quantizer.assign_cycle": "choice(50, 60)"})
    study = Study("synthetic", "adaqp", tmp_path / "out", TINY)
    said: list[str] = []
    assert tune(study, trials=2, target=0.5, seed=0, say=said.append) == []
    trials = optuna.load_study(study_name=study.name, storage=study.storage).get_trials()
    assert [t.state for t in trials] == [optuna.trial.TrialState.FAIL] * 2 and all(t.value is None for t in trials)
    for run_dir in (study.dir / "attempt0-0", study.dir / "attempt0-1"):
        record = json.loads((run_dir / "record.json").read_text())
        assert record["status"] == "failed" and "is not allowed with trainer.epochs=3" in record["error"]
        assert not (run_dir / "metrics.jsonl").exists()  # refused before it ran
    failed = [line for line in said if "trial failed (not scored)" in line]
    assert len(failed) == 2 and all("quantizer.assign_cycle=" in line for line in failed)
    assert any("0 of 2 trials complete" in line and "runs the missing ones" in line for line in said)


def test_a_failed_method_is_named_and_the_next_still_runs_then_tune_exits_nonzero(tmp_path, monkeypatch, capsys):
    """Each method's failure is one line (method, dataset, setting, the rerun's error); tune goes on to the next
    method, lists every missing row at the end and in DIR/missing_rows.txt, and exits 1."""
    from gnnq.bench.tune import main

    monkeypatch.setenv("GNNQ_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("GNNQ_DATA", str(tmp_path / "data"))
    out = tmp_path / "out"
    # both fail before any run: no such preset; mini-batch is one process, refused at 2 ranks
    argv = ["--method", "no_such_preset", "--method", "minibatch", "--dataset", "synthetic"]
    rc = main([*argv, "--target", "synthetic=0.5", "--trials", "1", "--final-seeds", "1", "--out", str(out), *TINY])
    err = capsys.readouterr().err
    assert rc == 1
    missing = (out / "missing_rows.txt").read_text().splitlines()
    assert missing[0].startswith("gnnq-bench tune: 4 leaderboard row(s) missing")
    by_row = {line.split(":", 1)[0].strip("- "): line for line in missing[1:]}
    assert set(by_row) == {
        f"{m} on synthetic, {s} setting" for m in ("no_such_preset", "minibatch") for s in ("default", "tuned")
    }
    default_minibatch = by_row["minibatch on synthetic, default setting"]
    assert "rerun failed with exit code 2" in default_minibatch and "cluster.nproc=2" in default_minibatch
    assert "not rerun" in by_row["minibatch on synthetic, tuned setting"]
    assert err.count("gnnq-bench tune: missing row: ") == 4  # each said when it happened, too


def test_a_trial_stops_at_the_target_and_a_later_one_is_pruned_at_the_studys_incumbent(tmp_path, monkeypatch):
    """A trial's epochs after the target change nothing: it stops there. A later trial runs only as long as the
    study's best time to target (trainer.stop_after_s in its record), then stops and scores as not reached."""
    import json

    import optuna

    monkeypatch.setenv("GNNQ_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("GNNQ_DATA", str(tmp_path / "data"))
    study = Study("synthetic", "pipegcn", tmp_path / "out", TINY)
    (reached,) = tune(study, trials=1, target=0.01, seed=0)  # any model reaches 1% validation accuracy in one epoch
    first = json.loads((study.dir / "attempt0-0" / "record.json").read_text())
    assert first["config"]["trainer"]["stop_at_val"] == 0.01 and first["config"]["trainer"]["stop_after_s"] is None
    assert (
        first["summary"]["epochs"] == 1
        and "reached trainer.stop_at_val=0.01" in first["summary"]["stopped_early"]["reason"]
    )
    assert 0 < reached.value < 1e3
    # an incumbent faster than any run: the next trial is pruned after its first epoch
    optuna.load_study(study_name=study.name, storage=study.storage).add_trial(
        optuna.trial.create_trial(params={}, distributions={}, value=1e-6)
    )
    trials = tune(study, trials=3, target=0.999, seed=0)
    pruned = json.loads((study.dir / "attempt1-0" / "record.json").read_text())
    assert pruned["config"]["trainer"]["stop_after_s"] == 1e-6
    assert pruned["summary"]["epochs"] == 1
    assert "passed trainer.stop_after_s=1e-06" in pruned["summary"]["stopped_early"]["reason"]
    assert max(t.value for t in trials) >= 1e6  # not reached: scored below every trial that reached the target
    assert "trial budget: trainer.stop_after_s=0.000" in (study.dir / "attempt1-0" / "cli.log").read_text()
