"""gnnq-report's care with what it reads and writes (issue 45.1-6), in process: records of a newer schema skipped
with a warning, runs of two sweeps told apart, --out checked, files written whole, progress on long work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gnnq.report import progress
from gnnq.report.output import OutError, check_out, save_figure
from gnnq.report.summary import find_records, run_names


def _record(d: Path, **extra) -> None:
    d.mkdir(parents=True)
    (d / "record.json").write_text(json.dumps({"status": "ok", "config": {}, **extra}))


def test_a_record_of_a_newer_schema_is_skipped_with_a_warning_naming_it(tmp_path):
    _record(tmp_path / "old")  # no schema_version: version 1
    _record(tmp_path / "now", schema_version=1)
    _record(tmp_path / "newer", schema_version=2)
    records, warnings = find_records([tmp_path])
    assert sorted(d.name for d, _ in records) == ["now", "old"]
    assert len(warnings) == 1 and "newer/record.json" in warnings[0] and "schema_version 2" in warnings[0]


def test_runs_of_two_sweeps_with_the_same_point_names_are_told_apart(tmp_path):
    dirs = [tmp_path / "A" / "0_trainer.seed=0", tmp_path / "B" / "0_trainer.seed=0", tmp_path / "B" / "1_x"]
    assert run_names(dirs) == ["A/0_trainer.seed=0", "B/0_trainer.seed=0", "1_x"]
    assert run_names([tmp_path / "same", tmp_path / "same"])[0].endswith("same")  # one path twice: no endless loop


def test_out_naming_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutError, match="is a file, not a directory"):
        check_out(tmp_path / "f")
    check_out(tmp_path / "new")  # made later


def test_a_figure_that_fails_to_save_leaves_nothing_and_names_its_path(tmp_path):
    class Broken:
        def savefig(self, f, **kwargs):
            f.write(b"\x89PNG half")
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError) as e:
        save_figure(Broken(), tmp_path / "plot.png")
    assert e.value.filename == str(tmp_path / "plot.png")
    assert list(tmp_path.iterdir()) == []


def test_progress_lines_only_on_long_work(monkeypatch, capsys):
    assert list(progress.steps(range(3), "quick")) == [0, 1, 2]
    assert capsys.readouterr().err == ""
    clock = iter(range(0, 100, 3))
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    list(progress.steps(list(range(4)), "reading records"))
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("gnnq-report: reading records 1/4 (") and err[-1].startswith(
        "gnnq-report: reading records: 4 done"
    )
