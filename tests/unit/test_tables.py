"""Every table spec in sweeps/ renders against the runs of its sweep; bad specs fail with one clear line.

Here: the in-process cases (no process started); the others are in `tests/e2e/test_tables.py`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gnnq.config.compose import SWEEPS_DIR
from gnnq.report.tables import SPEC_SUFFIX, TableSpecError, _header_and_rows, build_table, load_spec, render_all

SWEEPS = SWEEPS_DIR
SPECS = sorted(SWEEPS.glob(f"*{SPEC_SUFFIX}"))


def test_there_are_specs():
    assert {p.name for p in SPECS} >= {
        "adaqp_ablation.table.yaml",
        "peers.table.yaml",
        "bitwidths.table.yaml",
        "table4.table.yaml",
        "adaqp_emulated.table.yaml",
        "adaqp_paper.table.yaml",
    }


@pytest.mark.parametrize(
    "text,needle",
    [
        ("title: x\ncolumns: [{label: a, metric: test}]\n", "'rows' must be a non-empty list"),
        ("rows: [{label: r}]\ncolumns: [{label: a}]\n", "column 'a' names no metric"),
        (
            "rows: [{label: r}]\ncolumns: [{label: a, metric: test, ratio_to: Vanilla}]\n",
            "ratio_to 'Vanilla', not a row",
        ),
        (
            "rows: [{label: r}]\ncolumns: [{label: a, metric: test, speedup_over: Vanilla}]\n",
            "column 'a' has speedup_over 'Vanilla', not a row",
        ),
        (
            "rows: [{label: r}]\ncolumns: [{label: a, metric: test, ratio_to: r, speedup_over: r}]\n",
            "column 'a' sets both ratio_to 'r' and speedup_over 'r'",
        ),
        (
            "rows: [{label: r}]\ncolumns: [{label: a, metric: test}]\nalso_run: experiment=x\n",
            "'also_run' must be a list",
        ),
        ("rows: [\n", "not a readable YAML table spec"),
    ],
)
def test_bad_specs_are_one_line_errors(tmp_path, text, needle):
    path = Path(tmp_path) / "bad.table.yaml"
    path.write_text(text)
    with pytest.raises(TableSpecError) as exc:
        load_spec(path)
    assert needle in str(exc.value) and str(path) in str(exc.value) and "\n" not in str(exc.value)


def test_latex_escaping_and_ratio_columns(tmp_path):
    from gnnq.report.tables import render_latex

    path = tmp_path / "t.table.yaml"
    path.write_text(
        "title: 'a_{b} ~x^2 & 50%'\nrows: [{label: base}, {label: 'r_1 #2'}]\n"
        "columns: [{label: v, metric: test}, {label: ratio, metric: test, ratio_to: base}]\n"
    )
    spec = load_spec(path)
    records = [{"status": "ok", "config": {"trainer": {"seed": s}, "x": 1}, "test": t} for s, t in ((0, 0.5), (1, 0.7))]
    cells = build_table({**spec, "rows": [{"label": "base"}, {"label": "r_1 #2"}]}, records)
    assert cells[0][1].stat.mean == 1.0 and cells[0][1].stat.std is None  # the base row is exactly 1
    tex = render_latex(spec, cells)
    assert r"a\_\{b\} \textasciitilde{}x\textasciicircum{}2 \& 50\%" in tex and r"r\_1 \#2" in tex


@pytest.mark.parametrize(
    "text,needle",
    [
        (
            "rows: [{label: r, match: {parallel.nmae: sync}}]\ncolumns: [{label: a, metric: test}]\n",
            "'parallel.nmae', which is not a config key",
        ),
        ("rows: [{label: r, match: sync}]\ncolumns: [{label: a, metric: test}]\n", "'match' must map"),
        ("rows: [{label: r}, {label: r}]\ncolumns: [{label: a, metric: test}]\n", "labels must be unique"),
        ("rows: [{label: r}]\ncolumns: [{label: a, metric: test, format: '.4q'}]\n", "column 'a'"),
        ("rows: [{label: r}]\ncolumns: [{label: a, metric: test}]\npaper: {r: 0.5}\n", "'paper' maps row labels"),
    ],
)
def test_spec_fields_are_checked(tmp_path, text, needle):
    path = Path(tmp_path) / "bad.table.yaml"
    path.write_text(text)
    with pytest.raises(TableSpecError, match=re.escape(needle)):
        load_spec(path)


def test_speedup_over_is_the_base_rows_value_over_this_rows_and_missing_cells_are_dashes(tmp_path):
    from gnnq.report.tables import render_csv, render_latex

    path = tmp_path / "t.table.yaml"
    path.write_text(
        "rows: [{label: slow, match: {trainer.lr: 0.1}}, {label: fast, match: {trainer.lr: 0.2}},\n"
        "       {label: none, match: {trainer.lr: 0.3}}]\n"
        "columns: [{label: ms, metric: epoch_time_s, scale: 1000, format: '.0f'},\n"
        "          {label: speedup, metric: epoch_time_s, speedup_over: slow, format: '.2f'},\n"
        "          {label: time ratio, metric: epoch_time_s, ratio_to: slow, format: '.2f'},\n"
        "          {label: vs none, metric: epoch_time_s, speedup_over: none}]\n"
    )
    spec = load_spec(path)
    records = [
        {"status": "ok", "config": {"trainer": {"lr": lr, "seed": s}}, "epoch_time_s": t}
        for lr, s, t in ((0.1, 0, 2.0), (0.1, 1, 2.2), (0.2, 0, 0.5), (0.2, 1, 0.55))
    ]
    cells = build_table(spec, records)
    values = [[c.stat.mean for c in line] for line in cells]
    assert values[0][:3] == pytest.approx([2100.0, 1.0, 1.0]) and values[0][3] is None
    assert values[1][:3] == pytest.approx([525.0, 4.0, 0.25]) and values[1][3] is None
    assert values[2] == [None] * 4  # no run: every cell of the row, ratios included, is empty
    md, _ = render_all(spec, records)
    _, rows = _header_and_rows(spec, cells)
    assert rows[1] == ["fast", "525 ± 35", "4.00", "0.25", "-"] and rows[2] == ["none", "-", "-", "-", "-"]
    tex = render_latex(spec, cells)
    assert "'-': no run" in md and r"none & - & - & - & - \\" in tex
    # booktabs, and the best of each column in bold: the lowest epoch time and time ratio, the highest speedup
    assert all(rule in tex for rule in ("\\toprule", "\\midrule", "\\bottomrule"))
    assert r"fast & \textbf{525 $\pm$ 35} & \textbf{4.00} & \textbf{0.25} & - \\" in tex
    assert r"slow & 2100 $\pm$ 141 & 1.00 & 1.00 & - \\" in tex
    assert render_csv(spec, cells).splitlines()[3] == "none" + ",,,0" * 4  # mean, std (blank), n per column


def test_paper_columns_show_beside_every_column_without_numbers(tmp_path):
    """``paper_columns: true`` renders the '(paper)' columns where the spec copies no number ('-')."""
    path = tmp_path / "t.table.yaml"
    path.write_text("paper_columns: true\nrows: [{label: a}]\ncolumns: [{label: test, metric: test}]\n")
    spec = load_spec(path)
    records = [{"status": "ok", "config": {"trainer": {"seed": 0}}, "test": 0.5}]
    headers, rows = _header_and_rows(spec, build_table(spec, records))
    assert headers == ["", "test", "test (paper)"] and rows == [["a", "0.5000", "-"]]
    path.write_text("paper_columns: yes please\nrows: [{label: a}]\ncolumns: [{label: test, metric: test}]\n")
    with pytest.raises(TableSpecError, match="paper_columns"):
        load_spec(path)


def test_every_peers_sweep_preset_fills_exactly_its_own_row_of_the_peers_table():
    """Each preset `gnnq -m sweep=peers` runs (and `also_run`) lands in one row of sweeps/peers.table.yaml, today's
    peers (pipeqs_published, sylvie and gnnq's variants of them) in rows of their own."""
    from omegaconf import OmegaConf

    from gnnq.config.compose import compose_config

    presets = OmegaConf.load(SWEEPS / "peers.yaml").hydra.sweeper.params.experiment.split(",")
    assert {"pipeqs_published", "pipeqs_gnnq", "sylvie", "sylvie_gnnq"} <= set(presets)
    spec = load_spec(SWEEPS / "peers.table.yaml")
    runs = [[f"experiment={p}"] for p in presets] + [line.split() for line in spec["also_run"]]
    records = []
    for i, overrides in enumerate(runs):
        config = OmegaConf.to_container(compose_config(overrides, "peers", str(SWEEPS)), resolve=False)
        config.pop("hydra", None)
        metrics = {"epoch_time_s": 1.0, "comm_bytes_per_epoch": 1.0, "best_val": 0.5}
        records.append({"status": "ok", "config": config, **metrics, "test": float(i)})
    cells = build_table(spec, records)
    test_col = [c["label"] for c in spec["columns"]].index("test")
    filled = {row["label"]: line[test_col].stat for row, line in zip(spec["rows"], cells) if line[test_col].stat.n}
    assert all(stat.n == 1 for stat in filled.values()), filled  # no row mixes two presets
    by_preset = {" ".join(runs[int(stat.mean)]): label for label, stat in filled.items()}
    assert len(filled) == len(by_preset) == len(runs)  # and no preset lands in two rows, or in none
    assert by_preset["experiment=pipeqs_published"] == "PipeQS"
    assert by_preset["experiment=pipeqs_gnnq"] == "PipeQS, bounded staleness (gnnq)"
    assert by_preset["experiment=sylvie"] == "Sylvie"
    assert by_preset["experiment=sylvie_gnnq"] == "Sylvie, sync warm-up (gnnq)"
    assert by_preset["experiment=adaqp_vanilla"] == "Vanilla"
