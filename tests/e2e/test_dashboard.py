"""The HTML dashboard in headless Chromium: rows render, sorting reorders, filtering hides, a click shows the config."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


@pytest.fixture(scope="module")
def dashboard(report_runs, tmp_path_factory) -> Path:
    if CHROMIUM is None:
        if os.environ.get("GNNQ_REQUIRE_CHROMIUM"):
            pytest.fail("chromium not found; .ci/run installs Debian's chromium package")
        pytest.skip("chromium not installed (apt-get install chromium)")
    out = tmp_path_factory.mktemp("dashboard")
    report = Path(sys.executable).parent / "gnnq-report"
    res = subprocess.run(
        [str(report), str(report_runs), "--out", str(out), "--dashboard"], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    return out / "dashboard.html"


def _chromium(page: Path, fragment: str = "", *extra: str) -> tuple[str, list[str]]:
    """The DOM after the page's script ran, and the page's console messages."""
    res = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--log-level=0",
            *extra,
            "--dump-dom",
            page.as_uri() + fragment,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout, [line for line in res.stderr.splitlines() if ":CONSOLE" in line]


def _rows(dom: str) -> list[dict]:
    """Table rows in page order: index, hidden, and per column its text and numeric value."""
    rows = []
    for attrs, cells in re.findall(r'<tr data-index="\d+"([^>]*)>(.*?)</tr>', dom, re.S):
        row = {"hidden": "hidden" in attrs}
        for key, value, text in re.findall(r'<td data-key="(\w+)"(?: data-value="([^"]*)")?[^>]*>(.*?)</td>', cells):
            row[key] = float(value) if value else re.sub(r"<[^>]+>", "", text)
        rows.append(row)
    return rows


def test_dashboard_is_self_contained(dashboard):
    text = dashboard.read_text()
    assert not re.search(r'(src|href)="(https?:)?//', text), "no network: nothing may be fetched"
    assert text.count('src="data:image/png;base64,') == 3  # accuracy vs throughput, bytes, curves


def test_rows_render_without_console_errors(dashboard):
    dom, console = _chromium(dashboard)
    rows = _rows(dom)
    assert len(rows) == 2 and not any(r["hidden"] for r in rows)  # two configurations (GCN, SAGE)
    assert {("model=sage" in r["command"]) for r in rows} == {True, False}
    assert all(isinstance(r["epoch_ms"], float) and r["runs"] == 2.0 for r in rows)
    assert all(
        r["command"].startswith("gnnq ")
        and r["hardware"] not in ("", "-")
        and re.fullmatch(r"\d{4}-\d\d-\d\d", r["date"])
        for r in rows
    )
    for r in rows:  # where the runs ran, from which commit and torch; bytes with the gradient all-reduce
        assert (r["ranks"], r["hosts"], r["torch"][:2]) == ("2", "1", "2."), r
        # one commit, or several joined by "; " when the checkout changed while the runs ran
        assert re.fullmatch(r"[0-9a-f]{10}(\+dirty)?(; [0-9a-f]{10}(\+dirty)?)*", r["commit"]), r
        assert r["wire_mb"] > r["halo_mb"], r
    # the command wraps between words only: each word is one unbreakable span
    cell = re.search(r'<td data-key="command"[^>]*>(.*?)</td>', dom, re.S).group(1)
    assert cell.startswith("<span>gnnq</span> <span>") and cell.count("<span>") == len(rows[0]["command"].split())
    assert console == []


def test_sorting_changes_the_order(dashboard):
    ascending, console = _chromium(dashboard, "#sort=epoch_ms")
    descending, console2 = _chromium(dashboard, "#sort=epoch_ms,desc")
    up = [r["epoch_ms"] for r in _rows(ascending)]
    down = [r["epoch_ms"] for r in _rows(descending)]
    assert up == sorted(up) and down == sorted(down, reverse=True) and up != down
    by_name_up = [r["command"] for r in _rows(_chromium(dashboard, "#sort=command")[0])]
    by_name_down = [r["command"] for r in _rows(_chromium(dashboard, "#sort=command,desc")[0])]
    assert by_name_up == by_name_down[::-1] and by_name_up != by_name_down
    assert console == console2 == []


def test_filtering_hides_rows(dashboard):
    dom, console = _chromium(dashboard, "#filter=model%3Dsage")
    rows = _rows(dom)
    assert [("model=sage" in r["command"]) for r in rows if not r["hidden"]] == [True]
    assert sum(r["hidden"] for r in rows) == 1 and "1 of 2 rows" in dom
    dom, _ = _chromium(dashboard, "#filter=no-such-config")
    assert all(r["hidden"] for r in _rows(dom))
    assert console == []


def _details(dom: str) -> str:
    return html.unescape(re.search(r'<div id="details">(.*?)</div>', dom, re.S).group(1))


def test_click_shows_the_diff_first_and_the_full_config_on_demand(dashboard, tmp_path):
    dom, console = _chromium(dashboard, "#open=1")
    details = _details(dom)
    assert details.index("differences from gnnq's defaults") < details.index("full resolved config")
    diff = details.split("differences from gnnq's defaults")[1].split("ran on")[0]
    # the runs' overrides (2 ranks, 1500 nodes, hidden 32, 3 epochs) are in the diff; keys left at their defaults are
    # not
    assert "cluster.nproc: 2" not in diff and "dataset.num_nodes: 1500" in diff and "model.hidden: 32" in diff
    assert (
        "trainer.lr" not in diff
        and '"name": "synthetic"' not in diff
        and "runs_root" not in diff
        and "logger." not in diff
    )
    assert re.search(r'<details id="full-config">', dom) and '<details id="full-config" open' not in dom
    full, _ = _chromium(dashboard, "#open=1&full")
    assert '<details id="full-config" open="">' in full and '"name": "synthetic"' in _details(full)
    assert console == []


def test_screenshot(dashboard, tmp_path):
    shot = tmp_path / "dashboard.png"
    subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            "--window-size=1400,1000",
            dashboard.as_uri() + "#open=0",
        ],
        capture_output=True,
        timeout=120,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_hostile_config_strings_and_nan_do_not_break_the_page(tmp_path):
    """A config string that would end the script element, and a NaN metric: the page still renders."""
    if CHROMIUM is None:
        pytest.skip("chromium not installed")
    from gnnq.report.aggregate import METRICS, Group, Leaderboard, Stat
    from gnnq.report.dashboard import write_dashboard

    evil = "</script><!--<script>alert(1)</script>"
    g = Group(
        "d", [f"dataset.path={evil}"], [(tmp_path / "run", {"config": {"dataset": {"path": evil}}, "status": "ok"})]
    )
    g.stats = {k: Stat(float("nan") if k == "test" else 1.0, None, 1) for k in METRICS}
    page = write_dashboard(tmp_path / "d.html", [g], [Leaderboard("d", "throughput", 1.0, 0.003, [g], [])], [])
    dom, console = _chromium(page, "#open=0&sort=nope")
    (row,) = _rows(dom)
    assert "&lt;/script&gt;" in row["command"] and console == []
    assert "alert(1)" in re.search(r'<div id="details">(.*?)</div>', dom, re.S).group(1)  # shown as text, not run
