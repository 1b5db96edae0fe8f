"""The reliability catalogue (python -m tests.reliability): a few fast cases through the same code as the
benchmark, and its global checks catching a lost record, an orphan process and a written secret for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.reliability import table
from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases import catalogue, select
from tests.reliability.runner import run_case

SAMPLE = ["config/unknown-key", "data/nan-features", "resume/nowhere", "places/runs-root-below-a-file"]


def test_the_catalogue_covers_every_family_with_at_least_60_cases():
    cases = catalogue()
    assert len(cases) >= 60
    families = {"config", "data", "resources", "cache", "faults", "resume", "places", "concurrency", "secrets"}
    assert families | {"report", "names"} <= {c.family for c in cases}
    assert [c.id for c in select("^config/unknown-key$")] == ["config/unknown-key"]


@pytest.mark.parametrize("case_id", SAMPLE)
def test_a_sample_of_the_catalogue_passes(tmp_path, case_id):
    (case,) = [c for c in catalogue() if c.id == case_id]
    result = run_case(case, tmp_path)
    assert result["result"] == "pass", (result["observed"], result["problems"])
    assert (result["records_lost"], result["orphans"], result["secrets_written"]) == (0, 0, 0)
    assert not (tmp_path / case_id.replace("/", "-")).exists(), "the case's directory is removed"


def _python(ctx, code: str, detach: bool = False) -> Outcome:
    """A real process with the case's environment (its marker and planted key)."""
    cmd = [sys.executable, "-c", code]
    if detach:  # started in the background and left running: an orphan of the case
        subprocess.Popen(cmd, env=ctx.env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        cmd = [sys.executable, "-c", "pass"]
    return Outcome(subprocess.run(cmd, env=ctx.env, capture_output=True, text=True))


def _earlier_record(ctx) -> None:
    (ctx.runs / "old").mkdir()
    (ctx.runs / "old" / "record.json").write_text(json.dumps({"status": "ok"}))


BAD = {
    "lost": Case(
        "t",
        "lost",
        "deletes an earlier record",
        Expect(exit=0),
        setup=_earlier_record,
        act=lambda ctx, _: _python(ctx, f"import os; os.remove({str(ctx.runs / 'old' / 'record.json')!r})"),
    ),
    "orphan": Case(
        "t",
        "orphan",
        "leaves a process running",
        Expect(exit=0),
        act=lambda ctx, _: _python(ctx, "import time; time.sleep(600)", detach=True),
    ),
    "secret": Case(
        "t",
        "secret",
        "writes the key to a file",
        Expect(exit=0),
        act=lambda ctx, _: _python(
            ctx, f"import os; open({str(ctx.root / 'f.txt')!r}, 'w').write(os.environ['WANDB_API_KEY'])"
        ),
    ),
}


@pytest.mark.parametrize("bad", list(BAD))
def test_the_global_checks_catch_what_they_count(tmp_path, bad):
    result = run_case(BAD[bad], tmp_path)
    counts = {"lost": result["records_lost"], "orphan": result["orphans"], "secret": result["secrets_written"]}
    assert result["result"] == "FAIL" and counts == {k: int(k == bad) for k in counts}, result
    if bad == "orphan":  # counted, then killed: nothing of the case is left
        from tests.reliability.procs import case_pids

        assert not [p for p in case_pids("", tmp_path) if "time.sleep(600)" in open(f"/proc/{p}/cmdline").read()]


def test_the_table_counts_per_family_and_overall(tmp_path):
    rows = [
        {
            "family": f,
            "case": c,
            "what": "w",
            "expected": "exit 2",
            "observed": "exit 2",
            "result": r,
            "problems": p,
            "records_lost": lost,
            "orphans": 0,
            "secrets_written": 0,
            "seconds": 1.5,
        }
        for f, c, r, p, lost in [
            ("a", "x", "pass", [], 0),
            ("a", "y", "FAIL", ["exit 1 | 2"], 1),
            ("b", "z", "pass", [], 0),
        ]
    ]
    summary = table.write(tmp_path, rows, ["python -m tests.reliability"], {"cores": os.cpu_count()})
    assert summary["families"]["a"] == {
        "cases": 2,
        "pass": 1,
        "fail": 1,
        "skip": 0,
        "seconds": 3.0,
        "records_lost": 1,
        "orphans": 0,
        "secrets_written": 0,
    }
    assert summary["overall"]["pass"] == 2 and summary["overall"]["cases"] == 3
    readme = (tmp_path / "README.md").read_text()
    assert "**2 of 3 cases pass (66.7%)**, 1 records lost" in readme and "`a/y`: exit 1 | 2" in readme
    assert json.loads((tmp_path / "results.json").read_text())["totals"] == summary
