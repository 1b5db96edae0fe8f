"""gnnq-bench's outputs: results.json, results.csv, README.md (command, machine, table) and the speedup plot."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pandas as pd

from gnnq.bench.compare import Point
from gnnq.bench.machine import describe_machine
from gnnq.bench.rerun_lines import own_preset, rerun_overrides
from gnnq.report import fields
from gnnq.track.progress import markdown_table

CSV_FIELDS = [
    "point",
    "method",
    "baseline",
    "setting",
    "runs",
    "epoch_time_s",
    "epoch_time_min_s",
    "epoch_time_max_s",
    "comm_share",
    "comm_bytes_per_epoch",
    "bytes_vs_baseline",
    "target_val",
    "time_to_target_s",
    "target_reached",
    "test_mean",
    "test_std",
    "test_vs_baseline",
    "speedup",
    "speedup_min",
    "speedup_max",
    "time_to_target_speedup",
    "codec_time_s",
    "overhead_time_s",
    "throughput_epochs_per_s",
    "wall_speedup",
    "bound_applies",
    "bound_no_overlap",
    "bound_overlap",
    "bound_fraction",
    "cores_per_host",
    "oversubscribed",
    "overrides",
]

# Per run in results.json: the summary values gnnq.bench.compare reads besides the record's own fields.
RUN_SUMMARY_KEYS = ("halo_comm_time_s", "codec_time_s", "overhead_time_s", "throughput_epochs_per_s")
NOT_HALO = "n/a"  # bound columns of a point whose messages are not halo rows (gnnq.bench.compare.halo_messages)

DEFINITIONS = (
    "Epoch: median over a run's epochs of the slowest rank's training step, then the median over repeats "
    "[min-max over repeats]. Comm share: exposed communication (halo messages and the gradient all-reduce: the time "
    "the computation waited for them) as a share of the epoch (median over repeats). MB/epoch: halo bytes put on "
    "the wire per training epoch, all ranks. "
    "Overhead: training work outside epochs in a run (AdaQP's channel profile, α exchange and bit-width "
    "reassignments; checkpoint writes), seconds, median over repeats. "
    "Time to target: summed training epoch times and overheads until validation first reaches the target (median "
    "over repeats; '-' unless every repeat reached it). Test: at the best validation epoch, mean ± std over repeats. "
    "Speedup: the baseline's epoch time over this point's, paired by repeat (both ran in the same round), "
    "median [min-max]; time-to-target speedup likewise. Wall speedup: the same ratio of wall-clock throughput, "
    "epochs / (epoch times + overheads). Bound: the speedup the method could reach, from the baseline's median epoch "
    "time T and its exposed halo communication M (T - M: compute and the gradient all-reduce, which no codec shrinks), "
    "and this point's byte ratio r and codec time K per epoch: without overlap T / (T - M + K + r·M), with perfect "
    "overlap T / max(T - M + K, r·M); 'of bound' is the measured speedup over the perfect-overlap bound; "
    f"'{NOT_HALO}': the point's messages are not halo rows (its method's registry line), so no bound applies. "
    "Cores/host: an emulated host's cores (own: pinned with cluster.pin_cores; shared: every host on all cores); "
    "'*' marks an oversubscribed emulation (its ranks' threads exceed their cores), whose compute is slower than on "
    "real hosts, so its speedups from cutting communication are understated."
)


def _f(value, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value * scale, spec)


def table_rows(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    axes = list(rows[0]["setting"]) if rows else []
    paired = _has_pairs(rows)
    headers = [
        *axes,
        "method",
        *(["against"] if paired else []),
        "runs",
        "epoch ms [min-max]",
        "comm share",
        "MB / epoch",
        "bytes vs base",
        "target val",
        "time to target s",
        "test (mean ± std)",
        "Δ test vs base",
        "speedup [min-max]",
        "bound (no overlap / perfect)",
        "of bound",
        "overhead s",
        "wall speedup",
        "time-to-target speedup",
        "cores / host",
    ]
    out = []
    for r in rows:
        out.append(
            [
                *(r["setting"][a] for a in axes),
                r["method"],
                *([r["baseline"]] if paired else []),
                str(r["runs"]) + (f" ({len(r['failed'])} failed)" if r["failed"] else ""),
                f"{_f(r['epoch_time_s'], '.1f', 1e3)} "
                f"[{_f(r['epoch_time_min_s'], '.1f', 1e3)}-{_f(r['epoch_time_max_s'], '.1f', 1e3)}]",
                _f(r["comm_share"], ".0%"),
                _f(r["comm_bytes_per_epoch"], ".2f", 1e-6),
                _f(r["bytes_vs_baseline"], ".3f"),
                _f(r["target_val"], ".4f"),
                f"{_f(r['time_to_target_s'], '.1f')} ({r['target_reached']})",
                f"{_f(r['test_mean'], '.4f')} ± {_f(r['test_std'], '.4f')}",
                _f(r["test_vs_baseline"], "+.4f"),
                f"{_f(r['speedup'], '.2f')}x [{_f(r['speedup_min'], '.2f')}-{_f(r['speedup_max'], '.2f')}]",
                f"{_f(r['bound_no_overlap'], '.2f')}x / {_f(r['bound_overlap'], '.2f')}x"
                if r.get("bound_applies", True)
                else NOT_HALO,
                _f(r["bound_fraction"], ".0%") if r.get("bound_applies", True) else NOT_HALO,
                _f(r["overhead_time_s"], ".2f"),
                _f(r["wall_speedup"], ".2f") + ("x" if r["wall_speedup"] is not None else ""),
                _f(r["time_to_target_speedup"], ".2f") + ("x" if r["time_to_target_speedup"] is not None else ""),
                _f(r.get("cores_per_host"), "g") + ("*" if r.get("oversubscribed") else ""),
            ]
        )
    return headers, out


def pairs_text(pairs: dict[str, str]) -> str:
    """The --pair references (method -> its baseline) as the README states them ('' without any)."""
    if not pairs:
        return ""
    listed = ", ".join(f"`{m}` against `{b}`" for m, b in pairs.items())
    return f"; {listed} (the table's 'against' column: each row's reference for its speedup, bytes, Δ test and bounds)"


def _has_pairs(rows: list[dict]) -> bool:
    """Whether the rows have more than one reference (some methods paired with their own: --pair)."""
    return len({r["baseline"] for r in rows}) > 1


def _vs(row: dict, rows: list[dict], sep: str = " ") -> str:
    """A plot label's note of the row's reference, where the rows have more than one (--pair)."""
    return f"{sep}(vs {row['baseline']})" if _has_pairs(rows) else ""


def write_csv(path: Path, rows: list[dict]) -> None:
    """One numeric column per statistic (blank where there is none); setting and overrides as text."""
    flat = [
        {**r, "setting": " ".join(f"{k}={v}" for k, v in r["setting"].items()), "overrides": " ".join(r["overrides"])}
        for r in rows
    ]
    # object dtype: each value written as Python writes it (an int stays 12345, not 12345.0, beside a blank)
    pd.DataFrame(flat, columns=CSV_FIELDS, dtype=object).to_csv(path, index=False)


def plot_speedup(rows: list[dict], x_key: str, out: Path, title: str) -> list[Path]:
    """Throughput speedup (median, min-max bars) against one setting axis; a line per method and other setting."""
    from gnnq.report.plots import _pyplot, _save

    plt = _pyplot()
    xs = list(dict.fromkeys(r["setting"][x_key] for r in rows))
    lines: dict[str, dict[str, dict]] = {}
    for r in rows:
        rest = " ".join(f"{k}={v}" for k, v in r["setting"].items() if k != x_key)
        lines.setdefault(f"{r['method']} {rest}".strip() + _vs(r, rows), {})[r["setting"][x_key]] = r
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, by_x in lines.items():
        pts = [(xs.index(x), r) for x, r in by_x.items() if r["speedup"] is not None]
        if not pts:
            continue
        ys = [r["speedup"] for _, r in pts]
        err = [
            [y - r["speedup_min"] for (_, r), y in zip(pts, ys)],
            [r["speedup_max"] - y for (_, r), y in zip(pts, ys)],
        ]
        ax.errorbar([i for i, _ in pts], ys, yerr=err, marker="o", capsize=3, label=label)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(xs)), xs)
    ax.set(xlabel=x_key, ylabel="throughput speedup vs baseline (epoch time ratio)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths = _save(fig, out, f"speedup_vs_{x_key.replace('.', '_')}")
    plt.close(fig)
    return paths


def eval_every(points: list[Point]) -> str:
    """The runs' trainer.eval_every values (one, or a list when points differ)."""
    values = sorted(
        {rec["config"]["trainer"]["eval_every"] for p in points for rec in p.runs.values() if "config" in rec}
    )
    return ", ".join(str(v) for v in values) or "?"


def point_runs_with(p: Point) -> str:
    """``4 ranks on 1 host, evaluation every 5 epochs`` as the point's runs ran (values joined where they differ)."""
    recs = [rec for rec in p.runs.values() if "config" in rec]

    def distinct(read) -> str:
        return "/".join(dict.fromkeys(str(v) for rec in recs if (v := read(rec)) is not None)) or "?"

    every = distinct(lambda rec: (rec["config"].get("trainer") or {}).get("eval_every"))
    return f"{distinct(fields.ranks)} ranks on {distinct(fields.hosts)} host(s), evaluation every {every} epoch(s)"


def full_overrides(p: Point) -> str:
    """Every key the point's runs set away from gnnq's defaults (the sweep file's and the command line's), seed
    left out: ``gnnq`` with these reruns one of them (add ``trainer.seed=N``)."""
    rec = next((rec for rec in p.runs.values() if isinstance(rec.get("config"), dict)), None)
    if rec is None:
        return " ".join(p.overrides)
    return " ".join(rerun_overrides(rec["config"], own_preset(p.overrides)))


def plot_bounds(rows: list[dict], out: Path, title: str) -> list[Path]:
    """Measured speedup beside its bounds (no overlap, perfect overlap), a group of bars per method and setting."""
    from gnnq.report.plots import LEGEND, _pyplot, _save

    shown = [r for r in rows if r["bound_overlap"] is not None and r["speedup"] is not None]
    if not shown:
        return []
    plt = _pyplot()
    labels = [
        " ".join([r["method"], *(f"{k}={v}" for k, v in r["setting"].items())]) + _vs(r, rows, "\n") for r in shown
    ]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(shown) + 2), 4.5))
    width = 0.27
    for i, (key, name) in enumerate(
        [
            ("speedup", "measured"),
            ("bound_no_overlap", "bound, no overlap"),
            ("bound_overlap", "bound, perfect overlap"),
        ]
    ):
        ax.bar([x + (i - 1) * width for x in range(len(shown))], [r[key] or 0.0 for r in shown], width, label=name)
    for x, r in enumerate(shown):
        if r["bound_fraction"] is not None:
            ax.annotate(f"{r['bound_fraction']:.0%}", (x - width, r["speedup"]), ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(shown)), labels, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="speedup over the baseline (epoch time)")
    ax.set_title(textwrap.fill(title, 60), fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(**LEGEND)  # beside the axes: never over a bar
    fig.tight_layout()
    paths = _save(fig, out, "speedup_vs_bound")
    plt.close(fig)
    return paths


def write_outputs(
    out: Path,
    command: str,
    sweep: tuple[str, str],
    rows: list[dict],
    points: list[Point],
    args,
    pairs: dict[str, str] | None = None,
) -> list[Path]:
    """``pairs``: the --pair references (method -> its own baseline method), checked by build_points."""
    pairs = pairs or {}
    out.mkdir(parents=True, exist_ok=True)
    machine = describe_machine()
    results = {
        "command": command,
        "sweep": sweep[1],
        "baseline": args.baseline,
        "pairs": pairs,
        "repeats": args.repeats,
        "machine": machine,
        "rows": rows,
        "runs": _run_entries(points),
    }
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    write_csv(out / "results.csv", rows)
    paths = [out / "results.json", out / "results.csv", out / "README.md"]
    plots = _write_plots(out, sweep[1], rows, args)
    readme = _readme_head(command, sweep[1], machine, points, args, pairs) + _readme_table(rows)
    if plots:
        readme += [f"Plot: {', '.join(p.name for p in plots)}", ""]
    readme += _failed_runs_lines(rows) + _point_lines(rows, points)
    (out / "README.md").write_text("\n".join(readme))
    return paths + plots


def _run_entries(points: list[Point]) -> list[dict]:
    """Every run of every point, in the order results.json lists them, with what the table's statistics read."""
    return [
        {
            "point": p.index,
            "repeat": r,
            "status": rec.get("status"),
            "error": rec.get("error"),
            "run_dir": rec.get("run_dir"),
            "epoch_time_s": rec.get("epoch_time_s"),
            "comm_time_s": rec.get("comm_time_s"),
            "comm_bytes_per_epoch": rec.get("comm_bytes_per_epoch"),
            "best_val": rec.get("best_val"),
            "test": rec.get("test"),
            # what the table's bounds and wall speedups read, so they can be recomputed from this file alone
            "summary": {key: (rec.get("summary") or {}).get(key) for key in RUN_SUMMARY_KEYS},
        }
        for p in points
        for r, rec in sorted(p.runs.items())
    ]


def _write_plots(out: Path, sweep_name: str, rows: list[dict], args) -> list[Path]:
    """The speedup plot along ``--plot-x`` (when given) and the speedup-against-bounds plot."""
    plots = []
    if args.plot_x:
        plots = plot_speedup(
            rows, args.plot_x, out, f"{sweep_name}: speedup vs {args.plot_x} (baseline {args.baseline})"
        )
    plots += plot_bounds(rows, out, f"{sweep_name}: measured speedup and its bounds (baseline {args.baseline})")
    return plots


def _readme_head(
    command: str, sweep_name: str, machine: dict, points: list[Point], args, pairs: dict[str, str]
) -> list[str]:
    """The README's title, command, machine and how the points were run."""
    return [
        f"# gnnq-bench: {sweep_name}",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, {machine['os']}, "
        f"torch {machine['torch']}, CUDA {'yes' if machine['cuda'] else 'no'}.",
        "",
        f"{len(points)} points x {args.repeats} repeats, interleaved (each repeat runs every point once, "
        f"the order rotated by one per repeat). Baseline: `{args.baseline}`{pairs_text(pairs)}. Evaluation every "
        f"{eval_every(points)} epoch(s) (trainer.eval_every; a message in flight when an evaluation starts is waited "
        "for inside its epoch).",
        "",
    ]


def _readme_table(rows: list[dict]) -> list[str]:
    """The comparison table and the definitions of its columns."""
    headers, cells = table_rows(rows)
    return [markdown_table(headers, cells), "", DEFINITIONS, ""]


def _failed_runs_lines(rows: list[dict]) -> list[str]:
    """The failed runs the statistics leave out, one line each (nothing when all succeeded)."""
    failed = [(r, f) for r in rows for f in r["failed"]]
    if not failed:
        return []
    return (
        ["Failed runs (not in the statistics):", ""]
        + [f"- {r['method']} repeat {f['repeat']}: {f['error']} ({f['run_dir']})" for r, f in failed]
        + [""]
    )


def _point_lines(rows: list[dict], points: list[Point]) -> list[str]:
    """Per row, what its point's runs ran with and the overrides that rerun one of them."""
    by_index = {p.index: p for p in points}
    return (
        [
            "Every point: what its runs ran with, and its full overrides against gnnq's defaults (the sweep "
            "file's settings and the command line's; `gnnq` + these reruns it, seed aside):",
            "",
        ]
        + [
            f"- {r['method']}{' ' if r['setting'] else ''}{' '.join(f'{k}={v}' for k, v in r['setting'].items())}: "
            f"{point_runs_with(by_index[r['point']])}; `{full_overrides(by_index[r['point']])}`"
            for r in rows
        ]
        + [""]
    )
