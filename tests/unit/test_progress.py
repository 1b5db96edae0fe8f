"""The launcher's progress bar (tqdm): one plain line per update in logs, with the epoch count, the ETA and the row's
numbers."""

from __future__ import annotations

import io
import re

from gnnq.track.progress import ProgressLine

LINE = re.compile(
    r"^epoch (\d+)/(\d+) \[([#.]{24})\] (\d\d:\d\d)<(\d\d:\d\d), loss (\S+)  val (\S+) \(best (\S+)\)  epoch (\S+) ms$"
)


def _rows(epochs, vals):
    return [{"epoch": e, "loss": 1.0 / e, "val": v, "epoch_time_s": 0.002 * e} for e, v in zip(epochs, vals)]


def test_log_lines_every_tenth_of_the_epochs_with_eta_and_best_val():
    out = io.StringIO()  # not a terminal
    progress = ProgressLine(20, out)
    vals = [0.5 + 0.01 * (e % 7) for e in range(1, 21)]
    for row in _rows(range(1, 21), vals):
        progress.update(row)
    progress.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    assert [int(m[1]) for m in parsed] == list(range(2, 21, 2)) and {m[2] for m in parsed} == {"20"}
    for m in parsed:
        e = int(m[1])
        assert m[3].count("#") == 24 * e // 20  # the bar's fill is the share of epochs done
        assert float(m[6]) == round(1.0 / e, 4) and float(m[7]) == round(vals[e - 1], 4)
        assert float(m[8]) == round(max(vals[:e]), 4) and float(m[9]) == round(2.0 * e, 1)
    assert parsed[-1][5] == "00:00"  # nothing left at the last epoch


def test_a_resumed_run_starts_its_bar_at_the_first_row():
    out = io.StringIO()
    progress = ProgressLine(6, out)
    for row in _rows(range(4, 7), [None, 0.7, None]):
        progress.update(row)
    lines = out.getvalue().splitlines()
    assert [LINE.match(line)[1] for line in lines] == ["4", "5", "6"]
    assert LINE.match(lines[0])[7] == "-" and LINE.match(lines[0])[8] == "-" and LINE.match(lines[2])[8] == "0.7000"
