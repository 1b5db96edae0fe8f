"""``gnnq-report DIR...``: the runs found under the given directories (recursively, multirun trees
included), their configurations (runs differing only in the seed grouped, mean ± std over seeds),
a leaderboard per dataset, and the failed runs with their errors. Unreadable records are skipped
with a warning naming the file."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import NoReturn

import yaml

from gnnq.config.compose import SWEEPS_DIR, resolve_config_dir
from gnnq.contract import RECORD_FILE, RECORD_SCHEMA_VERSION
from gnnq.errors import describe_os_error
from gnnq.report.aggregate import CRITERIA, MISSING, Leaderboard, group_runs, leaderboards, lookup
from gnnq.report.dashboard import write_dashboard
from gnnq.report.fields import dataset
from gnnq.report.frames import (
    GROUPS_SHOWN,
    groups_frame,
    leaderboard_frame,
    leaderboard_shown,
    notes,
    text_view,
)
from gnnq.report.labels import method_labels
from gnnq.report.output import OutError, cannot_write, check_out, write_csv, write_text
from gnnq.report.paper_latex import details_latex, narrow_latex
from gnnq.report.plots import plot_report
from gnnq.report.progress import steps
from gnnq.report.tables import SPEC_SUFFIX, TableSpecError, load_spec, render_all
from gnnq.report.throughput import SECTION_INTRO, reconciliation_lines
from gnnq.report.wandb_report import log_report, source_run
from gnnq.track.progress import fmt_value, markdown_table


def find_records(dirs: list[Path]) -> tuple[list[tuple[Path, dict]], list[str]]:
    """The records below ``dirs`` and a warning for each one left out: unreadable, of a newer schema, or in a
    directory this user may not read."""
    records, warnings = [], []
    paths = [path for d in dirs for path in record_paths(Path(d), warnings)]
    for path in steps(paths, "reading records"):
        try:
            rec = json.loads(path.read_text())
            rec["status"], rec["config"]  # noqa: B018 - both must be present
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.append(f"skipping {path}: unreadable record ({type(exc).__name__})")
            continue
        version = rec.get("schema_version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version > RECORD_SCHEMA_VERSION:
            warnings.append(
                f"skipping {path}: a record of schema_version {version!r}; this gnnq-report reads up to "
                f"{RECORD_SCHEMA_VERSION} (update gnnq to report it)"
            )
            continue
        records.append((path.parent, rec))
    return records, warnings


def record_paths(root: Path, warnings: list[str]) -> list[Path]:
    """Every record file below ``root`` (symbolic links to directories not followed, as ``rglob`` did), sorted; a
    directory that cannot be listed (another user's, made under umask 077) adds a warning naming it."""

    def unreadable(exc: OSError) -> None:
        warnings.append(
            f"skipping {exc.filename}: cannot read it ({describe_os_error(exc)}); the runs in it are left out"
        )

    found = []
    for dirpath, _, names in os.walk(root, onerror=unreadable):
        if RECORD_FILE in names:
            found.append(Path(dirpath) / RECORD_FILE)
    return sorted(found)


def run_names(run_dirs: list[Path]) -> list[str]:
    """Each run's name in the tables: its directory's name, with as many parent directories as it takes to tell it
    from every other run (two sweeps' ``0_trainer.seed=0`` become ``A/0_trainer.seed=0`` and ``B/...``)."""
    parts = [Path(os.path.abspath(d)).parts for d in run_dirs]
    depth = {i: 1 for i in range(len(parts))}
    while True:
        names = {i: "/".join(p[-depth[i] :]) for i, p in enumerate(parts)}
        seen: dict[str, list[int]] = {}
        for i, name in names.items():
            seen.setdefault(name, []).append(i)
        clashes = [i for same in seen.values() if len(same) > 1 for i in same if depth[i] < len(parts[i])]
        if not clashes:
            return [names[i] for i in range(len(parts))]
        for i in clashes:
            depth[i] += 1


def _table_spec(value: str) -> Path:
    """A spec path, or a shipped spec by sweep name (``peers``) or by its path in the checkout
    (``sweeps/peers.table.yaml``)."""
    path = Path(value)
    if path.is_file():
        return path
    if (SWEEPS_DIR / f"{value}{SPEC_SUFFIX}").is_file():
        return SWEEPS_DIR / f"{value}{SPEC_SUFFIX}"
    return resolve_config_dir(str(path.parent)) / path.name if path.parent != Path(".") else path


def records_table(records: list[tuple[Path, dict]]) -> str:
    rows = []
    for name, (_, r) in zip(run_names([d for d, _ in records]), records):
        c = r["config"]
        rows.append(
            [
                name,
                dataset(r),
                c["model"]["name"],
                c["partitioner"]["name"],
                c["parallel"]["name"],
                c["quantizer"]["name"],
                r.get("world_size") or c["cluster"]["nproc"],
                r["status"],
                fmt_value(r.get("best_val")),
                fmt_value(r.get("test")),
                fmt_value(r.get("epoch_time_s") and r["epoch_time_s"] * 1000, ".1f"),
                "-" if r.get("comm_bytes_per_epoch") is None else f"{r['comm_bytes_per_epoch']:,}",
            ]
        )
    headers = [
        "run",
        "dataset",
        "model",
        "partitioner",
        "parallel",
        "quantizer",
        "ranks",
        "status",
        "best val",
        "test",
        "epoch ms",
        "halo bytes/epoch",
    ]
    return markdown_table(headers, rows)


def leaderboard_title(board: Leaderboard) -> str:
    pts = f"{board.tolerance * 100:g} points"
    if board.criterion == "time" and board.target is None:
        how = "time to a target validation metric (none: the runs report no validation metric)"
    elif board.criterion == "time":
        how = (
            f"time (epochs and overheads) until validation reaches {board.target:.4f} (the best mean best-val "
            f"minus {pts})"
        )
        if not board.ranked:
            how += f"; no configuration reached it in every seed ({len(board.others)} not ranked, see why)"
    elif board.criterion in ("test", "val"):
        how = f"mean {'test' if board.criterion == 'test' else 'best validation'} metric over seeds"
    else:
        what = (
            "wall-clock throughput (epochs/s, overheads included)"
            if board.criterion == "throughput"
            else "halo bytes per epoch"
        )
        how = f"{what} among configurations within {pts} of the best mean test {board.best_test:.4f}"
    if board.criterion != "time" and board.target is not None:
        how += f"; time to target: until validation first reaches {board.target:.4f}"
    return f"Leaderboard: {board.dataset}, ranked by {how}"


def _chosen(value):
    """A group's node (``dataset``) stands for its choice's name, as ``dataset=cora`` does on gnnq's command line."""
    return value["name"] if isinstance(value, dict) and "name" in value else value


def select(records: list[tuple[Path, dict]], where: str) -> list[tuple[Path, dict]]:
    """Records whose config has KEY=VALUE (the value read as Hydra would: numbers, booleans, null, lists; a group
    such as ``dataset=cora`` matches its choice's name); a filter that keeps no run is an error listing the values
    present."""
    key, sep, text = where.partition("=")
    if not sep or not key:
        raise ValueError(f"--where {where!r}: expected KEY=VALUE, e.g. dataset.name=cora")
    try:
        value = yaml.safe_load(text) if text else ""
    except yaml.YAMLError as exc:
        raise ValueError(f"--where {where!r}: the value is not readable ({type(exc).__name__})") from None
    if records and all(lookup(r["config"], key) is MISSING for _, r in records):
        raise ValueError(f"--where {where!r}: no run's config has the key {key!r}")
    present = [_chosen(lookup(r["config"], key)) for _, r in records]

    def equal(got) -> bool:
        want = value
        if isinstance(want, str) and isinstance(got, (int, float)) and not isinstance(got, bool):
            try:
                want = float(want)  # YAML 1.1 reads 1e-3 as a string
            except ValueError:
                return False
        if (
            isinstance(got, (int, float))
            and isinstance(want, (int, float))
            and not isinstance(got, bool) | isinstance(want, bool)
        ):
            return math.isclose(got, want, rel_tol=1e-9)
        return got == want

    kept = [(d, r) for (d, r), got in zip(records, present) if equal(got)]
    if records and not kept:
        values = sorted({json.dumps(v) if not isinstance(v, str) else v for v in present if v is not MISSING}, key=str)
        raise ValueError(
            f"--where {where!r} matched none of the {len(records)} runs; {key} is one of: {', '.join(values)}"
        )
    return kept


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gnnq-report", description=__doc__)
    parser.add_argument("dirs", nargs="+", type=Path, help="directories searched recursively for record.json")
    parser.add_argument(
        "--criterion",
        choices=CRITERIA,
        default="throughput",
        help="leaderboard ranking: throughput (default; wall-clock, overheads included) or bytes among "
        "configurations near the best test accuracy, test or val (mean accuracy, every configuration "
        "ranked), or time to a target validation accuracy",
    )
    parser.add_argument(
        "--tolerance", type=float, default=0.003, help="accuracy cut, as a fraction (0.003 = 0.3 points)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="also write report.md, groups.csv and leaderboard-<dataset>.csv and .tex here "
        "(and each table as <name>.md, .csv and .tex)",
    )
    parser.add_argument(
        "--table",
        type=_table_spec,
        action="append",
        default=[],
        help="a table spec: a path, or the name of a sweep shipped with gnnq (peers: its "
        "sweeps/peers.table.yaml) to render from these runs (its row labels name the methods in "
        "legends and leaderboards); repeatable",
    )
    parser.add_argument(
        "--plots",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --out (the default there; --no-plots: none): accuracy vs throughput (Pareto front), bytes per "
        "epoch by kind and training curves, and where "
        "runs on emulated hosts vary the link bandwidth or the number of hosts, throughput speedup over "
        "Vanilla (sync, fp32) against it; PNG and SVG",
    )
    parser.add_argument(
        "--dashboard",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --out (the default there; --no-dashboard: none): dashboard.html, one self-contained page "
        "(leaderboards, plots, configs)",
    )
    parser.add_argument(
        "--wandb",
        choices=("offline", "online"),
        help="with --out: also log the tables (and plots) as wandb.Tables to a W&B run of their own",
    )
    parser.add_argument("--wandb-project", default="gnnq", help="W&B project for --wandb (default gnnq)")
    parser.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only runs whose config has this value (e.g. dataset.name=cora); repeatable",
    )
    return parser


def outputs_by_default(out: Path | None, plots: bool | None, dashboard: bool | None) -> tuple[bool, bool]:
    """With ``--out`` the plots and the dashboard are written unless ``--no-plots`` / ``--no-dashboard`` say not
    (the dashboard shows the plots: it brings them along unless --no-plots); without ``--out``, neither."""
    if out is None:
        return False, False
    return plots is not False, dashboard is not False


def _with_notes(table: str, frame) -> list[str]:
    return [table, *([""] + notes(frame) if notes(frame) else []), ""]


def main(argv: list[str]) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if (args.plots or args.dashboard or args.wandb) and not args.out:
        parser.error("--plots, --dashboard and --wandb need --out DIR")
    args.plots, args.dashboard = outputs_by_default(args.out, args.plots, args.dashboard)
    try:
        check_out(args.out)
        _report(parser, args)
    except OutError as exc:
        print(f"gnnq-report: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:  # --out on a full or read-only filesystem: nothing partial is left (gnnq.report.output)
        if exc.filename is None:
            raise
        print(f"gnnq-report: error: {cannot_write(exc)}", file=sys.stderr)
        sys.exit(1)


def _report(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    records = _selected_records(parser, args)
    specs = _load_table_specs(args.table)
    groups = group_runs(records)
    for g, label in zip(groups, method_labels(groups, specs)):
        g.label = label
    boards = leaderboards(groups, args.criterion, args.tolerance)
    failed = [(d, r) for d, r in records if r["status"] != "ok"]
    # Numeric frames (CSV, W&B); Markdown and LaTeX show their text view.
    tables = {"configurations": groups_frame(groups)}
    tables.update({f"leaderboard/{b.dataset}": leaderboard_frame(b) for b in boards})
    sections = _ranking_sections(records, groups, boards, tables)
    sections += _spec_table_sections(specs, records, args.out, tables)
    paths, figure_sections = _figure_sections(args, groups, boards, len(failed))
    sections += figure_sections
    if args.wandb:
        sections += _wandb_sections(args, records, tables, paths, len(failed))
    if failed:
        sections += ["## Failed runs (not ranked)", ""] + [f"- {d}: {r.get('error')}" for d, r in failed] + [""]
    text = "\n".join(sections)
    print(text)
    if args.out:
        _write(args.out, text, tables, boards)


def _exit_on_table_spec_error(exc: TableSpecError) -> NoReturn:
    """Print a bad --table spec's error and exit 2."""
    print(f"gnnq-report: error: {exc}", file=sys.stderr)
    sys.exit(2)


def _selected_records(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[tuple[Path, dict]]:
    """The records under ``args.dirs`` that pass every ``--where``; warnings printed, exit 1 when none is left."""
    records, warnings = find_records(args.dirs)
    try:
        for where in args.where:
            records = select(records, where)
    except ValueError as exc:
        parser.error(str(exc))
    for w in warnings:
        print(f"gnnq-report: warning: {w}", file=sys.stderr)
    if not records:
        print(
            f"gnnq-report: no run records (record.json) found under {', '.join(map(str, args.dirs))}", file=sys.stderr
        )
        sys.exit(1)
    return records


def _load_table_specs(paths: list[Path]) -> list[dict]:
    """The ``--table`` specs, read; exit 2 naming the first bad one."""
    try:
        return [load_spec(p) for p in paths]
    except TableSpecError as exc:
        _exit_on_table_spec_error(exc)


def _ranking_sections(
    records: list[tuple[Path, dict]], groups: list, boards: list[Leaderboard], tables: dict
) -> list[str]:
    """Markdown: the runs, the configurations, throughput reconciliation and one leaderboard per dataset."""
    sections = ["## Runs", "", records_table(records), "", "## Configurations (mean ± std over seeds)", ""]
    if groups:
        sections += _with_notes(
            markdown_table(*text_view(tables["configurations"], GROUPS_SHOWN)), tables["configurations"]
        )
    else:
        sections += ["(no successful runs)", ""]
    if reconciliation_lines(groups):
        sections += ["## Throughput and epoch time", "", SECTION_INTRO, "", *reconciliation_lines(groups), ""]
    for board in boards:
        frame = tables[f"leaderboard/{board.dataset}"]
        sections += [
            f"## {leaderboard_title(board)}",
            "",
            *_with_notes(markdown_table(*text_view(frame, leaderboard_shown(frame))), frame),
            *([f"Within the noise: {line}" for line in board.noise] + [""] if board.noise else []),
        ]
    return sections


def _spec_table_sections(
    specs: list[dict], records: list[tuple[Path, dict]], out: Path | None, tables: dict
) -> list[str]:
    """Markdown of each ``--table`` spec; its frame added to ``tables`` under ``table/<name>``."""
    sections = []
    for spec in specs:
        try:
            md, table = render_all(spec, [r for _, r in records], out)
        except TableSpecError as exc:
            _exit_on_table_spec_error(exc)
        sections.append(md)
        tables[f"table/{Path(spec['_path']).name.removesuffix(SPEC_SUFFIX)}"] = table
    return sections


def _figure_sections(
    args: argparse.Namespace, groups: list, boards: list[Leaderboard], failed: int
) -> tuple[list[Path], list[str]]:
    """The plots and the dashboard (as ``args`` asks): their paths and the Markdown lines naming them."""
    if not (args.plots or args.dashboard):
        return [], []
    paths = plot_report(groups, args.out) if args.plots else []
    sections = ["## Plots", ""] + [f"- {p.name}" for p in paths if p.suffix == ".png"] + [""] if paths else []
    if args.dashboard:
        page = write_dashboard(args.out / "dashboard.html", groups, boards, paths, failed=failed)
        sections += [f"Dashboard: {page}", ""]
    return paths, sections


def _wandb_sections(
    args: argparse.Namespace, records: list[tuple[Path, dict]], tables: dict, paths: list[Path], failed: int
) -> list[str]:
    """Log the report as a W&B run; the Markdown line naming it."""
    settings = {
        "dirs": [str(d) for d in args.dirs],
        "where": args.where,
        "criterion": args.criterion,
        "tolerance": args.tolerance,
        "tables": [str(p) for p in args.table],
        "runs": len(records),
        "failed": failed,
    }
    run_dir = log_report(
        args.out,
        tables,
        paths,
        settings,
        [source_run(d, r) for d, r in records],
        project=args.wandb_project,
        mode=args.wandb,
    )
    return [f"W&B run ({args.wandb}): {run_dir}", ""]


def _write(out: Path, text: str, tables: dict, boards: list[Leaderboard]) -> None:
    write_text(out / "report.md", text)
    write_csv(out / "groups.csv", tables["configurations"])
    for board in boards:
        frame = tables[f"leaderboard/{board.dataset}"]
        write_csv(out / f"leaderboard-{board.dataset}.csv", frame)
        title = leaderboard_title(board)
        write_text(out / f"leaderboard-{board.dataset}.tex", narrow_latex(board, frame, title))
        write_text(out / f"leaderboard-{board.dataset}-details.tex", details_latex(board, frame, title))
