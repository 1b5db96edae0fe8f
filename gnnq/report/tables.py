"""Paper tables from run records, described by a small YAML spec (``sweeps/<sweep>.table.yaml``).

A spec names its rows and columns; each selects runs by config keys (``match``: dotted key ->
value, or a list of allowed values). A cell aggregates the successful runs matching both its
row and its column over seeds (mean ± std) for the column's metric (a record key such as
``test`` or ``epoch_time_s``, or a dotted path into the record such as ``summary.best_epoch``)::

    title: AdaQP ablation
    metric_format: ".4f"          # default format of every column
    rows:
      - {label: Vanilla, match: {parallel.name: sync, quantizer.name: fp32}}
      - {label: AdaQP, match: {parallel.name: overlap, quantizer.name: adaptive}}
    columns:
      - {label: epoch ms, metric: epoch_time_s, scale: 1000, format: ".1f"}
      - {label: bytes vs Vanilla, metric: comm_bytes_per_epoch, ratio_to: Vanilla, format: ".3f"}
      - {label: speedup, metric: epoch_time_s, speedup_over: Vanilla, format: ".2f"}
      - {label: halo MB, metric: comm_bytes_per_epoch, scale: 1.0e-6, best: none}  # no bold in LaTeX
      - {label: Cora test, metric: test, match: {dataset.name: cora}}
    paper:                        # optional published numbers, shown beside ours
      Vanilla: {Cora test: 0.815}
    paper_columns: true           # optional: the '(paper)' columns even where no number is copied ('-')
    also_run: ["experiment=minibatch cluster.nproc=1"]   # optional: runs outside the sweep that fill rows

``ratio_to: ROW`` divides each cell by the same column's cell in row ROW (this row / ROW);
``speedup_over: ROW`` is the inverse, ROW / this row (epoch time -> throughput speedup). A cell
no run matches stays empty ('-' in Markdown and LaTeX, blank in CSV), as do the ratios that need it.

Rendered as Markdown, CSV (numbers only: mean, std and n per column) and LaTeX (booktabs; each column's
best value in bold: the highest for accuracy and speedups, the lowest for times and bytes, or as the
column's ``best: max|min|none`` says).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from gnnq.config.registry import config_keys
from gnnq.report import latex
from gnnq.report.aggregate import MISSING, SEED_KEYS, Stat, lookup
from gnnq.report.output import write_csv, write_text
from gnnq.report.overrides import config_overrides
from gnnq.track.progress import markdown_table

SPEC_SUFFIX = ".table.yaml"
RATIO_KEYS = ("ratio_to", "speedup_over")  # this row / base row, base row / this row


class TableSpecError(ValueError):
    """A table spec that cannot be rendered; the message names the spec and the bad field."""


@dataclass
class Cell:
    stat: Stat
    paper: float | None = None


def load_spec(path: Path) -> dict:
    try:
        spec = OmegaConf.to_container(OmegaConf.load(path))
    except Exception as exc:  # noqa: BLE001 - any parse error becomes one line naming the file
        raise TableSpecError(
            f"{path}: not a readable YAML table spec ({type(exc).__name__}: {exc})".splitlines()[0]
        ) from None
    if not isinstance(spec, dict):
        raise TableSpecError(f"{path}: a table spec is a mapping with title, rows and columns")
    for key in ("rows", "columns"):
        items = spec.get(key)
        if not isinstance(items, list) or not items or not all(isinstance(i, dict) and "label" in i for i in items):
            raise TableSpecError(f"{path}: '{key}' must be a non-empty list of entries with a 'label'")
    for col in spec["columns"]:
        if "metric" not in col and "metric" not in spec:
            raise TableSpecError(
                f"{path}: column {col['label']!r} names no metric (and the spec has no default 'metric')"
            )
    for key in ("rows", "columns"):
        labels = [str(i["label"]) for i in spec[key]]
        if len(set(labels)) != len(labels):
            raise TableSpecError(
                f"{path}: {key} labels must be unique; repeated: {sorted({x for x in labels if labels.count(x) > 1})}"
            )
        for item in spec[key]:
            _check_match(path, key[:-1], item)
    for col in spec["columns"]:
        try:
            float(col.get("scale", 1.0))
            format(0.0, col.get("format", spec.get("metric_format", ".4f")))
        except (TypeError, ValueError):
            raise TableSpecError(
                f"{path}: column {col['label']!r}: 'scale' must be a number and 'format' a Python format spec "
                "such as .4f"
            ) from None
        if col.get("best", "none") not in ("max", "min", "none"):
            raise TableSpecError(f"{path}: column {col['label']!r}: 'best' is max, min or none, not {col['best']!r}")
    paper = spec.get("paper") or {}
    if not isinstance(paper, dict) or not all(isinstance(v, dict) for v in paper.values()):
        raise TableSpecError(f"{path}: 'paper' maps row labels to {{column label: number}}")
    if not isinstance(spec.get("paper_columns", False), bool):
        raise TableSpecError(f"{path}: 'paper_columns' is true or false")
    also = spec.get("also_run", [])
    if not isinstance(also, list) or not all(isinstance(a, str) for a in also):
        raise TableSpecError(f"{path}: 'also_run' must be a list of override strings")
    labels = [r["label"] for r in spec["rows"]]
    for col in spec["columns"]:
        for key in RATIO_KEYS:
            if col.get(key) is not None and col[key] not in labels:
                raise TableSpecError(
                    f"{path}: column {col['label']!r} has {key} {col[key]!r}, not a row; rows: {', '.join(labels)}"
                )
        if all(col.get(key) is not None for key in RATIO_KEYS):
            raise TableSpecError(
                f"{path}: column {col['label']!r} sets both ratio_to {col['ratio_to']!r} and "
                f"speedup_over {col['speedup_over']!r}; a column is one ratio (speedup_over is the inverse of ratio_to)"
            )
    spec["_path"] = str(path)
    return spec


def _check_match(path, kind: str, item: dict) -> None:
    """``match`` is a mapping of config keys that exist in gnnq's schema."""
    match = item.get("match") or {}
    if not isinstance(match, dict):
        raise TableSpecError(f"{path}: {kind} {item['label']!r}: 'match' must map config keys to values")
    keys = config_keys()
    for key in match:
        if str(key) not in keys:
            raise TableSpecError(f"{path}: {kind} {item['label']!r} matches on {key!r}, which is not a config key")


def _matches(record: dict, match: dict | None) -> bool:
    for key, want in (match or {}).items():
        got = lookup(record["config"], key)
        if isinstance(want, list) and not isinstance(got, list):
            if got not in want:
                return False
        elif got != want:
            return False
    return True


def _check_one_configuration(spec: dict, row: dict, col: dict, runs: list[dict]) -> None:
    """A cell averages over seeds only: runs that differ in anything else make it meaningless."""
    configs = {tuple(config_overrides(r["config"], exclude=SEED_KEYS)) for r in runs}
    if len(configs) > 1:
        a, b = (set(c) for c in list(configs)[:2])
        differ = sorted(a ^ b)[:4]
        raise TableSpecError(
            f"{spec['_path']}: cell ({row['label']!r}, {col['label']!r}) matches runs of {len(configs)} configurations "
            f"(they differ in {' '.join(differ)}); narrow the spec's match keys or select runs with --where KEY=VALUE"
        )


def build_table(spec: dict, records: list[dict]) -> list[list[Cell]]:
    """Cells[row][column]; raises TableSpecError for a metric no matching run has."""
    ok = [r for r in records if r.get("status") == "ok"]
    cells = []
    for row in spec["rows"]:
        line = []
        for col in spec["columns"]:
            metric = col.get("metric", spec.get("metric"))
            runs = [r for r in ok if _matches(r, row.get("match")) and _matches(r, col.get("match"))]
            _check_one_configuration(spec, row, col, runs)
            values = [lookup(r, metric) for r in runs]
            if runs and all(v is MISSING for v in values):
                keys = sorted(k for k, v in runs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool))
                raise TableSpecError(
                    f"{spec['_path']}: column {col['label']!r} names metric {metric!r}, which the runs do not have; "
                    f"record keys with numbers: {', '.join(keys)} (or a dotted path such as summary.best_epoch)"
                )
            stat = Stat.of([v for v in values if v is not MISSING and isinstance(v, (int, float))])
            scale = float(col.get("scale", 1.0))
            if stat.mean is not None:
                stat = Stat(stat.mean * scale, None if stat.std is None else stat.std * scale, stat.n)
            paper = (spec.get("paper") or {}).get(row["label"], {}).get(col["label"])
            line.append(Cell(stat, paper))
        cells.append(line)
    labels = [r["label"] for r in spec["rows"]]
    for j, col in enumerate(spec["columns"]):
        inverse = col.get("speedup_over") is not None
        base_label = col["speedup_over"] if inverse else col.get("ratio_to")
        if base_label is not None:
            base = cells[labels.index(base_label)][j].stat.mean
            for line in cells:  # a ratio of means; its spread is not shown (the base row's own spread would enter it)
                s = line[j].stat
                if s.mean is None or not base:
                    ratio = None
                elif inverse:
                    ratio = base / s.mean if s.mean else None
                else:
                    ratio = s.mean / base
                line[j] = Cell(Stat(ratio, None, s.n), line[j].paper)
    return cells


def _formats(spec: dict) -> list[str]:
    return [col.get("format", spec.get("metric_format", ".4f")) for col in spec["columns"]]


def _has_paper(spec: dict) -> bool:
    return bool(spec.get("paper")) or bool(spec.get("paper_columns"))


def _header_and_rows(spec: dict, cells: list[list[Cell]], pm: str = " ± ") -> tuple[list[str], list[list[str]]]:
    """Column headers and text rows; with paper numbers each column gets a 'paper' column beside it."""
    headers = [spec.get("row_header", "")]
    for col in spec["columns"]:
        headers.append(col["label"])
        if _has_paper(spec):
            headers.append(f"{col['label']} (paper)")
    rows = []
    for row, line in zip(spec["rows"], cells):
        texts = [row["label"]]
        for cell, fmt in zip(line, _formats(spec)):
            texts.append(cell.stat.text(fmt, pm=pm))
            if _has_paper(spec):
                texts.append("-" if cell.paper is None else format(cell.paper, fmt))
        rows.append(texts)
    return headers, rows


def render_markdown(spec: dict, cells: list[list[Cell]]) -> str:
    headers, rows = _header_and_rows(spec, cells)
    n = max((c.stat.n for line in cells for c in line), default=0)
    lines = [f"### {spec.get('title', Path(spec['_path']).name)}", "", markdown_table(headers, rows), ""]
    lines.append(f"Mean ± std over seeds (up to {n} runs per cell); '-': no run.")
    if spec.get("note"):
        lines.append(str(spec["note"]))
    return "\n".join(lines) + "\n"


def table_frame(spec: dict, cells: list[list[Cell]]) -> pd.DataFrame:
    """The numbers: per table column its mean, std and n (and the paper's number), one row per table row."""
    rows = []
    for row, line in zip(spec["rows"], cells):
        values = {spec.get("row_header", "row"): row["label"]}
        for col, cell in zip(spec["columns"], line):
            label = col["label"]
            values.update({f"{label} mean": cell.stat.mean, f"{label} std": cell.stat.std, f"{label} n": cell.stat.n})
            if _has_paper(spec):
                values[f"{label} paper"] = cell.paper
        rows.append(values)
    frame = pd.DataFrame(rows)
    numbers = frame.columns[1:]
    frame[numbers] = frame[numbers].apply(pd.to_numeric)  # None -> NaN: an empty cell in CSV
    return frame


def render_csv(spec: dict, cells: list[list[Cell]]) -> str:
    return table_frame(spec, cells).to_csv(index=False)


def _column_best(col: dict, spec: dict) -> str | None:
    """Which value of a column is best ('max', 'min' or None): its ``best``, else by its metric (speedups: max)."""
    if "best" in col:
        return None if col["best"] == "none" else col["best"]
    return "max" if col.get("speedup_over") is not None else latex.direction(col.get("metric", spec.get("metric")))


def render_latex(spec: dict, cells: list[list[Cell]]) -> str:
    """A booktabs table environment (``\\usepackage{booktabs}``), each column's best value in bold."""
    headers, rows = _header_and_rows(spec, cells)
    bold = [set()]
    for j, col in enumerate(spec["columns"]):
        bold.append(latex.best_rows([line[j].stat.mean for line in cells], _column_best(col, spec)))
        if _has_paper(spec):
            bold.append(set())
    return latex.render(headers, rows, str(spec.get("title", Path(spec["_path"]).name)), bold)


def render_all(spec: dict, records: list[dict], out_dir: Path | None = None) -> tuple[str, pd.DataFrame]:
    """Build the table; write <name>.md/.csv/.tex under ``out_dir``; return the Markdown and the numbers
    (``table_frame``)."""
    cells = build_table(spec, records)
    md = render_markdown(spec, cells)
    frame = table_frame(spec, cells)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        name = Path(spec["_path"]).name.removesuffix(SPEC_SUFFIX)
        write_text(out_dir / f"{name}.md", md)
        write_csv(out_dir / f"{name}.csv", frame)
        write_text(out_dir / f"{name}.tex", render_latex(spec, cells))
    return md, frame
