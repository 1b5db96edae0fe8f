"""The launcher stays a short pipeline (issue 40): following ``cfg`` from ``gnnq.launch.job.run_job`` (the walk of
tools/house_metrics.py) enters no file more than twice by a call and climbs back into a file it has been in at most
5 times. A step that passes ``cfg`` down through several files again fails here."""

from __future__ import annotations

from pathlib import Path

from tools.house_metrics import Code, walk

ROOT = Path(__file__).resolve().parents[2]


def test_following_cfg_from_run_job_enters_each_file_at_most_twice_and_climbs_back_at_most_5_times():
    w = walk(Code(ROOT / "gnnq"))
    room, calls = w["most_entries"][0]
    assert calls <= 2, f"{room} is entered {calls} times by calls that pass cfg: {w}"
    assert w["climbs_back"] <= 5, w
    assert w["rooms"] >= 5, f"the walk no longer follows run_job's steps: {w}"  # compose/prepare/start at least
