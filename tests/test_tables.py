"""Every table spec in sweeps/ renders against the runs of its sweep; bad specs fail with one clear line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gnnq.config.compose import CONF_DIR
from gnnq.report.summary import find_records
from gnnq.report.tables import SPEC_SUFFIX, TableSpecError, build_table, load_spec, render_all
from tests.cli_helpers import run_gnnq

SWEEPS = CONF_DIR.parent / "sweeps"
SPECS = sorted(SWEEPS.glob(f"*{SPEC_SUFFIX}"))
# Each sweep shrunk to seconds: a 400-node synthetic graph, 2 ranks, 2 epochs (the sweep's own axes kept).
TINY = ["dataset=synthetic", "dataset.num_nodes=400", "cluster.nproc=2", "model.hidden=16", "trainer.epochs=2", "trainer.eval_every=1",
        "quantizer.assign_cycle=1", "quantizer.group_size=20", "quantizer.profile_repeats=1"]  # fmt: skip
# Sweeps whose columns name their datasets keep them (the real Planetoid files) with one seed.
KEEP_DATA = {"table4": ["cluster.nproc=2", "model.layers=3", "model.hidden=16", "trainer.epochs=2", "trainer.eval_every=1",
                        "parallel.warmup_iterations=2", "trainer.seed=0"]}  # fmt: skip


def test_there_are_specs():
    assert {p.name for p in SPECS} >= {"adaqp_ablation.table.yaml", "peers.table.yaml", "bitwidths.table.yaml"}


@pytest.mark.parametrize("spec_path", SPECS, ids=[p.name for p in SPECS])
def test_spec_renders_against_its_sweep(spec_path, tmp_path, request):
    sweep = spec_path.name.removesuffix(SPEC_SUFFIX)
    assert (SWEEPS / f"{sweep}.yaml").is_file(), f"{spec_path.name} has no sweep file {sweep}.yaml beside it"
    spec = load_spec(spec_path)
    base = ["--config-dir", str(SWEEPS), "--config-name", sweep]
    tiny, data = TINY, tmp_path / "data"
    if sweep in KEEP_DATA:
        tiny, data = KEEP_DATA[sweep], request.getfixturevalue("planetoid_root")
    res = run_gnnq(["-m", *base, *tiny], tmp_path / "runs" / "sweep", data, timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    for i, extra in enumerate(spec.get("also_run", [])):
        res = run_gnnq([*base, *tiny, *extra.split()], tmp_path / "runs" / f"extra{i}", data)
        assert res.returncode == 0, res.stderr[-2000:]
    records = [r for _, r in find_records([tmp_path / "runs"])[0]]
    cells = build_table(spec, records)
    for row, line in zip(spec["rows"], cells):
        for col, cell in zip(spec["columns"], line):
            assert cell.stat.n >= 1, f"{spec_path.name}: no run fills ({row['label']!r}, {col['label']!r})"
    md, _ = render_all(spec, records, tmp_path / "out")
    name = spec_path.name.removesuffix(SPEC_SUFFIX)
    assert all(row["label"] in md for row in spec["rows"])
    tex = (tmp_path / "out" / f"{name}.tex").read_text()
    assert tex.count("\\\\") == len(spec["rows"]) + 1 and "\\begin{tabular}" in tex
    csv_lines = (tmp_path / "out" / f"{name}.csv").read_text().strip().splitlines()
    assert len(csv_lines) == len(spec["rows"]) + 1
    # A column naming a metric the runs lack fails, naming the spec, the column and the metric.
    speed = {"label": "speed", "metric": "epochs_per_fortnight", "match": spec["columns"][0].get("match", {})}
    broken = {**spec, "columns": [*spec["columns"], speed]}
    with pytest.raises(TableSpecError, match=r"column 'speed' names metric 'epochs_per_fortnight'.*test"):
        build_table(broken, records)


@pytest.mark.parametrize("text,needle", [
    ("title: x\ncolumns: [{label: a, metric: test}]\n", "'rows' must be a non-empty list"),
    ("rows: [{label: r}]\ncolumns: [{label: a}]\n", "column 'a' names no metric"),
    ("rows: [{label: r}]\ncolumns: [{label: a, metric: test, ratio_to: Vanilla}]\n", "ratio_to 'Vanilla', not a row"),
    ("rows: [{label: r}]\ncolumns: [{label: a, metric: test}]\nalso_run: experiment=x\n", "'also_run' must be a list"),
    ("rows: [\n", "not a readable YAML table spec"),
])  # fmt: skip
def test_bad_specs_are_one_line_errors(tmp_path, text, needle):
    path = Path(tmp_path) / "bad.table.yaml"
    path.write_text(text)
    with pytest.raises(TableSpecError) as exc:
        load_spec(path)
    assert needle in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_latex_escaping_and_ratio_columns(tmp_path):
    from gnnq.report.tables import render_latex

    path = tmp_path / "t.table.yaml"
    path.write_text("title: 'a_{b} ~x^2 & 50%'\nrows: [{label: base}, {label: 'r_1 #2'}]\n"
                    "columns: [{label: v, metric: test}, {label: ratio, metric: test, ratio_to: base}]\n")  # fmt: skip
    spec = load_spec(path)
    records = [{"status": "ok", "config": {"trainer": {"seed": s}, "x": 1}, "test": t} for s, t in ((0, 0.5), (1, 0.7))]
    cells = build_table({**spec, "rows": [{"label": "base"}, {"label": "r_1 #2"}]}, records)
    assert cells[0][1].stat.mean == 1.0 and cells[0][1].stat.std is None  # the base row is exactly 1
    tex = render_latex(spec, cells)
    assert r"a\_\{b\} \textasciitilde{}x\textasciicircum{}2 \& 50\%" in tex and r"r\_1 \#2" in tex


@pytest.mark.parametrize("text,needle", [
    ("rows: [{label: r, match: {parallel.nmae: sync}}]\ncolumns: [{label: a, metric: test}]\n", "'parallel.nmae', which is not a config key"),
    ("rows: [{label: r, match: sync}]\ncolumns: [{label: a, metric: test}]\n", "'match' must map"),
    ("rows: [{label: r}, {label: r}]\ncolumns: [{label: a, metric: test}]\n", "labels must be unique"),
    ("rows: [{label: r}]\ncolumns: [{label: a, metric: test, format: '.4q'}]\n", "column 'a'"),
    ("rows: [{label: r}]\ncolumns: [{label: a, metric: test}]\npaper: {r: 0.5}\n", "'paper' maps row labels"),
])  # fmt: skip
def test_spec_fields_are_checked(tmp_path, text, needle):
    path = Path(tmp_path) / "bad.table.yaml"
    path.write_text(text)
    with pytest.raises(TableSpecError, match=re.escape(needle)):
        load_spec(path)
