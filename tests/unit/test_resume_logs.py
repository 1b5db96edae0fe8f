"""Every attempt's torchrun log survives a chain of resumes (issue 31 item 14): a resume that fails again before
its next checkpoint must not overwrite the log kept from the attempt before it."""

from __future__ import annotations

from gnnq.launch.job import kept_log_path


def test_each_failed_attempt_keeps_its_own_log(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    kept = []
    for attempt in ("crash", "first resume", "second resume"):  # all end at the checkpoint of epoch 2
        log = logs / "torchrun.log"
        log.write_text(attempt)
        target = kept_log_path(log, 2)
        log.replace(target)
        kept.append(target)
    assert [p.name for p in kept] == [
        "torchrun-until-epoch-2.log",
        "torchrun-until-epoch-2-2.log",
        "torchrun-until-epoch-2-3.log",
    ]
    assert [p.read_text() for p in kept] == ["crash", "first resume", "second resume"]
    assert kept_log_path(logs / "torchrun-h1.log", 5).name == "torchrun-h1-until-epoch-5.log"
