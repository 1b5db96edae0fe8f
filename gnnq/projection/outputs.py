"""gnnq-bench project's outputs: the printed table, results.json, results.csv, README.md and speedup heatmaps."""

from __future__ import annotations

import csv
import datetime as dt
import json
import statistics
from pathlib import Path

from gnnq.track.progress import markdown_table

LABEL = "projected"


def _f(v, spec: str, scale: float = 1.0) -> str:
    return "-" if v is None else format(v * scale, spec)


def table(points) -> str:
    headers = [
        "method",
        "hosts",
        "ranks/host",
        "Gbit/s",
        "parts",
        "projected epoch ms",
        "compute ms",
        "exposed comm ms",
        "projected speedup",
        "Plexus model ms",
        "measured epoch ms",
        "error",
    ]
    rows = []
    for p in points:
        r = p.row()
        rows.append(
            [
                r["method"],
                r["hosts"],
                r["ranks_per_host"],
                f"{r['link_gbit']:g}",
                r["parts"],
                _f(r["projected_epoch_s"], ".1f", 1e3),
                _f(r["projected_compute_s"], ".1f", 1e3),
                _f(r["projected_exposed_comm_s"], ".1f", 1e3),
                _f(r["projected_speedup"], ".2f") + ("x" if r["projected_speedup"] is not None else ""),
                _f(r.get("plexus_model_epoch_s"), ".1f", 1e3),
                _f(r["measured_epoch_s"], ".1f", 1e3),
                _f(r["error"], "+.1%"),
            ]
        )
    return markdown_table(headers, rows)


def print_table(points) -> None:
    print(table(points))
    for line in crossover_lines(crossover([p.row() for p in points])):
        print(line)


def crossover(rows: list[dict]) -> list[dict]:
    """Per bandwidth: the smallest host count at which the best grid method (``family`` grid: parallel=tensor3d)
    projects a shorter epoch than the best partition method, or None; only where both families were projected."""
    out = []
    for bw in sorted({r["link_gbit"] for r in rows}):
        best: dict = {}
        for r in rows:
            if r["link_gbit"] == bw and r.get("family") in ("grid", "partition"):
                key = (r["hosts"], r["family"])
                best[key] = min(best.get(key, float("inf")), r["projected_epoch_s"])
        hosts = sorted({h for h, fam in best if (h, "grid") in best and (h, "partition") in best})
        if not hosts:
            continue
        wins = [h for h in hosts if best[(h, "grid")] < best[(h, "partition")]]
        out.append(
            {
                "link_gbit": bw,
                "hosts_checked": hosts,
                "grid_wins_from": wins[0] if wins else None,
                "grid_wins_at": wins,
                "label": LABEL,
            }
        )
    return out


def _hosts(hosts: list[int]) -> str:
    return ", ".join(str(h) for h in hosts)


def crossover_lines(found: list[dict]) -> list[str]:
    out = []
    for c in found:
        if c["grid_wins_from"] is None:
            what = f"none up to {max(c['hosts_checked'])} hosts (the best partition method is faster at every count)"
        else:
            what = (
                f"the best grid method first beats the best partition method at {c['grid_wins_from']} hosts "
                f"(faster at {_hosts(c['grid_wins_at'])} of {_hosts(c['hosts_checked'])})"
            )
        out.append(f"- {c['link_gbit']:g} Gbit/s: {what} (projected)")
    return out


def error_summary(points) -> dict:
    """Median and worst absolute relative error of the points with a measurement, by host count."""
    out = {}
    for hosts in sorted({p.cluster.hosts for p in points}):
        errs = [abs(p.row()["error"]) for p in points if p.cluster.hosts == hosts and p.measured_s]
        if errs:
            out[hosts] = {
                "points": len(errs),
                "median_abs_error": statistics.median(errs),
                "worst_abs_error": max(errs),
            }
    return out


def write_outputs(out: Path, command: str, points, args, notes: list[str]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    rows = [p.row() for p in points]
    errors = error_summary(points)
    cross = crossover(rows)
    (out / "results.json").write_text(
        json.dumps(
            {"command": command, "label": LABEL, "rows": rows, "errors": errors, "crossover": cross, "notes": notes},
            indent=1,
        )
    )
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        writer.writeheader()
        writer.writerows(rows)
    paths = [out / "results.json", out / "results.csv"]
    paths += heatmaps(points, args.baseline, out)
    lines = [
        "# Projected epoch times (gnnq-bench project)",
        "",
        f"Made {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC with:",
        "",
        "```bash",
        command,
        "```",
        "",
        "Every epoch time and speedup in the 'projected' columns is a projection (docs/projection.md), not a "
        "measurement; 'measured' columns are real runs. Engine: " + args.engine + ".",
        "",
        table(points),
    ]
    if cross:
        lines += [
            "",
            "Crossover, PROJECTED (per bandwidth, the best parallel=tensor3d point against the best partition "
            "method at the same hosts; 'Plexus model ms': Plexus's own model for the same grid):",
            "",
        ]
        lines += crossover_lines(cross)
    if errors:
        lines += ["", "Error of the projection against the measured runs (|projected - measured| / measured):", ""]
        lines += [
            f"- {h} hosts: {e['points']} points, median {e['median_abs_error']:.1%}, worst {e['worst_abs_error']:.1%}"
            for h, e in errors.items()
        ]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in dict.fromkeys(notes)]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    return [*paths, out / "README.md"]


def heatmaps(points, baseline: str, out: Path) -> list[Path]:
    """One PNG per method: projected speedup over the baseline, hosts x bandwidth (only for a 2-D grid)."""
    hosts = sorted({p.cluster.hosts for p in points})
    links = sorted({p.cluster.link_gbit for p in points})
    if len(hosts) < 2 or len(links) < 2:
        return []
    from gnnq.report.plots import _pyplot

    plt = _pyplot()
    methods = [m for m in dict.fromkeys(p.method for p in points) if m != baseline]
    paths = []
    for m in methods:
        grid = [[None] * len(links) for _ in hosts]
        for p in points:
            if p.method == m and p.speedup is not None:
                grid[hosts.index(p.cluster.hosts)][links.index(p.cluster.link_gbit)] = p.speedup
        if all(v is None for row in grid for v in row):
            continue
        fig, ax = plt.subplots(figsize=(1.2 * len(links) + 2.5, 0.6 * len(hosts) + 1.8))
        vals = [[float("nan") if v is None else v for v in row] for row in grid]
        from matplotlib.colors import TwoSlopeNorm

        seen = [v for row in grid for v in row if v is not None]
        norm = TwoSlopeNorm(vcenter=1.0, vmin=min(0.5, min(seen)), vmax=max(1.5, max(seen)))  # 1 = as fast as base
        im = ax.imshow(vals, cmap="RdYlGn", norm=norm, aspect="auto", origin="lower")
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, "-" if v is None else f"{v:.2f}x", ha="center", va="center", fontsize=9)
        ax.set_xticks(range(len(links)), [f"{x:g}" for x in links])
        ax.set_yticks(range(len(hosts)), [str(h) for h in hosts])
        ax.set_xlabel("link Gbit/s")
        ax.set_ylabel("hosts")
        ax.set_title(f"{m} vs {baseline}: PROJECTED speedup", fontsize=10)
        fig.colorbar(im, ax=ax)
        fig.tight_layout()
        path = out / f"heatmap_{m}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths
