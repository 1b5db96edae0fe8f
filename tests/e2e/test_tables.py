"""Every table spec in sweeps/ renders against the runs of its sweep; bad specs fail with one clear line.

Here: the real command-line runs and system services; the others are in `tests/unit/test_tables.py`.
"""

from __future__ import annotations

import pytest

from gnnq.config.compose import SWEEPS_DIR
from gnnq.report.summary import find_records
from gnnq.report.tables import (
    SPEC_SUFFIX,
    TableSpecError,
    _header_and_rows,
    _matches,
    build_table,
    load_spec,
    render_all,
)
from tests.cli_helpers import run_gnnq

# a fixture: skip (or fail with GNNQ_REQUIRE_NETNS=1) without namespaces
from tests.e2e.test_emulated import netns_host  # noqa: F401

SWEEPS = SWEEPS_DIR
# adaqp_paper's columns name AdaQP's four datasets, whose real files are not here: tests/e2e/test_adaqp_paper.py runs
# its points on small files in each loader's real format and renders its table. table4_published renders the runs of
# `python -m benchmarks.admm` (both ways of the same presets: no sweep file of its own), whose --table reads it.
ELSEWHERE = {f"adaqp_paper{SPEC_SUFFIX}", f"table4_published{SPEC_SUFFIX}"}
SPECS = sorted(p for p in SWEEPS.glob(f"*{SPEC_SUFFIX}") if p.name not in ELSEWHERE)
# Each sweep shrunk to seconds: a 400-node synthetic graph, 2 ranks, 11 epochs (the sweep's own axes kept). Its adaptive
# points take assign_cycle from sweeps/<sweep>/quantizer/adaptive.yaml (at most 10): a command-line quantizer.* key
# would reach its fp32 points too, which have no such key.
TINY = [
    "dataset=synthetic",
    "dataset.num_nodes=400",
    "cluster.nproc=2",
    "model.hidden=16",
    "trainer.epochs=11",
    "trainer.eval_every=1",
]
ADAPTIVE_TINY = ["quantizer.assign_cycle=1", "quantizer.group_size=20", "quantizer.profile_repeats=1"]
# Sweeps whose columns name their datasets keep them (the real Planetoid files) with one seed. Table IV is
# sampled: Cora only (its CiteSeer points are the same presets on the other file; they render '-' here).
KEEP_DATA = {
    "table4": [
        "dataset=cora",
        "cluster.nproc=2",
        "model.layers=6",
        "model.hidden=16",
        "trainer.epochs=2",
        "trainer.eval_every=1",
        "trainer.seed=0",
    ]
}  # (its gamlp_* points are parallel=sync)
# Columns of datasets the test does not run (Table IV's datasets whose files its data root lacks, and the
# sampled-out CiteSeer): rendered '-'.
ABSENT_DATA = {"table4": {"citeseer", "pubmed", "amazon-computers", "amazon-photo", "coauthor-cs", "coauthor-physics"}}
# Sweeps on emulated hosts (cluster=emulated: network namespaces, so root and iproute2) shrunk further to
# 2 hosts of one rank each, at the sweep's own link. Their specs' columns for other settings
# (adaqp_emulated: 10 and 25 Gbit/s, 4 and 8 hosts) no tiny run fills: running every setting would
# take minutes, so those cells are checked to render '-' (a cell without runs), and the spec is
# built once more with its columns' cluster.hosts moved to the runs' 2 hosts so that every column
# whose link the runs have (speedup, bytes and test at 1 Gbit/s) meets real runs.
NETNS = {
    "adaqp_emulated": [*(o for o in TINY if not o.startswith("cluster.nproc=")), "cluster.hosts=2", "cluster.nproc=1"]
}


@pytest.mark.parametrize(
    "spec_path",
    [
        pytest.param(p, marks=[pytest.mark.machine_wide] if p.name.removesuffix(SPEC_SUFFIX) in NETNS else [])
        for p in SPECS
    ],
    ids=[p.name for p in SPECS],
)
def test_spec_renders_against_its_sweep(spec_path, tmp_path, request):
    sweep = spec_path.name.removesuffix(SPEC_SUFFIX)
    assert (SWEEPS / f"{sweep}.yaml").is_file(), f"{spec_path.name} has no sweep file {sweep}.yaml beside it"
    spec = load_spec(spec_path)
    base = ["--config-dir", str(SWEEPS), "--config-name", sweep]
    tiny, data = TINY, tmp_path / "data"
    if sweep in KEEP_DATA:
        tiny, data = KEEP_DATA[sweep], request.getfixturevalue("planetoid_root")
    if sweep in NETNS:
        request.getfixturevalue("netns_host")
        tiny = NETNS[sweep]
    res = run_gnnq(["-m", *base, *tiny], tmp_path / "runs" / "sweep", data, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    sampled_out = ABSENT_DATA.get(sweep, set())
    also_run = [e for e in spec.get("also_run", []) if not {f"dataset={d}" for d in sampled_out} & set(e.split())]
    for i, extra in enumerate(also_run):
        adaptive = (
            ADAPTIVE_TINY if "quantizer=adaptive" in extra.split() else []
        )  # one run: its quantizer's keys may be given
        res = run_gnnq([*base, *tiny, *extra.split(), *adaptive], tmp_path / "runs" / f"extra{i}", data)
        assert res.returncode == 0, res.stderr[-2000:]
    records = [r for _, r in find_records([tmp_path / "runs"])[0]]
    assert records and all(r["status"] == "ok" for r in records)
    cells = build_table(spec, records)
    # A column some run matches is filled in every row; in the full-size sweeps every column is.
    ran = [any(_matches(r, col.get("match")) for r in records) for col in spec["columns"]]
    absent = [(col.get("match") or {}).get("dataset.name") in ABSENT_DATA.get(sweep, ()) for col in spec["columns"]]
    assert not any(r and a for r, a in zip(ran, absent))
    assert all(r or a for r, a in zip(ran, absent)) if sweep not in NETNS else any(ran), (
        f"{spec_path.name}: columns without runs: {ran}"
    )
    for row, line in zip(spec["rows"], cells):
        for col, cell, filled in zip(spec["columns"], line, ran):
            if filled:
                assert cell.stat.n >= 1, f"{spec_path.name}: no run fills ({row['label']!r}, {col['label']!r})"
            else:
                assert cell.stat.n == 0 and cell.stat.mean is None and cell.stat.text() == "-"
    md, _ = render_all(spec, records, tmp_path / "out")
    _, text_rows = _header_and_rows(spec, cells)
    step = 2 if spec.get("paper") else 1  # with paper numbers a "(paper)" column follows each column
    assert all((text == "-") != filled for line in text_rows for text, filled in zip(line[1::step], ran))
    if sweep in NETNS:
        _check_emulated_columns(spec, records)
    name = spec_path.name.removesuffix(SPEC_SUFFIX)
    assert all(row["label"] in md for row in spec["rows"])
    tex = (tmp_path / "out" / f"{name}.tex").read_text()
    assert tex.count("\\\\") == len(spec["rows"]) + 1 and "\\begin{tabular}" in tex
    csv_lines = (tmp_path / "out" / f"{name}.csv").read_text().strip().splitlines()
    assert len(csv_lines) == len(spec["rows"]) + 1
    # A column naming a metric the runs lack fails, naming the spec, the column and the metric.
    speed = {
        "label": "speed",
        "metric": "epochs_per_fortnight",
        "match": spec["columns"][ran.index(True)].get("match", {}),
    }
    broken = {**spec, "columns": [*spec["columns"], speed]}
    with pytest.raises(TableSpecError, match=r"column 'speed' names metric 'epochs_per_fortnight'.*test"):
        build_table(broken, records)


def _check_emulated_columns(spec: dict, records: list[dict]) -> None:
    """The spec with its columns moved to the runs' host count: speedups, byte ratios and accuracy from the records."""
    (hosts,) = {r["config"]["cluster"]["hosts"] for r in records}
    link = records[0]["config"]["cluster"]["link"]
    moved = [{**c, "match": {**c["match"], "cluster.hosts": hosts}} for c in spec["columns"]]
    cells = build_table({**spec, "columns": moved}, records)
    by_row = {row["label"]: [r for r in records if _matches(r, row["match"])] for row in spec["rows"]}
    assert all(len(runs) == 1 for runs in by_row.values()), {k: len(v) for k, v in by_row.items()}
    (vanilla,) = by_row["Vanilla"]
    for row, line in zip(spec["rows"], cells):
        (run,) = by_row[row["label"]]
        for col, cell in zip(moved, line):
            if col["match"]["cluster.link"] != link:
                assert cell.stat.mean is None
            elif col.get("speedup_over") == "Vanilla":
                assert cell.stat.mean == pytest.approx(vanilla["epoch_time_s"] / run["epoch_time_s"])
            elif col.get("ratio_to") == "Vanilla":
                assert cell.stat.mean == pytest.approx(run[col["metric"]] / vanilla[col["metric"]])
            else:
                assert cell.stat.mean == pytest.approx(run[col["metric"]])
    labels = [row["label"] for row in spec["rows"]]
    (j,) = [j for j, c in enumerate(moved) if c["label"] == "bytes vs Vanilla"]
    bytes_ratio = [cells[labels.index(f"uniform {b}-bit")][j].stat.mean for b in (8, 4, 2)]
    assert 1.0 > bytes_ratio[0] > bytes_ratio[1] > bytes_ratio[2] > 0.0, bytes_ratio  # fewer bits, fewer bytes
