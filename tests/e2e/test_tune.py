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
