"""Projection tables (issue 33): every method's projected speedup over Vanilla on 4..256 hosts x 1..100 Gbit/s.

    python -m benchmarks.projection_tables --runs DIR --out results/projection/tables

DIR holds the traced 2-host runs (results/projection/validation/run.sh). For each method and target bandwidth the
source trace is that method's 2-host run recorded at the nearest bandwidth (log scale): adaptive methods choose
their bit-widths from the link they measured, so their bytes belong to it. Its model compute (per kind, layer and
direction; the codec excepted) is, by default (--compute-from vanilla), Vanilla's least-disturbed trace's: every
method trains the same GCN on the same parts, the machine was shared, and the traced compute of one method varied
between its runs by up to 4x, far more than the methods differ; so the methods differ by their messages, overlap,
staleness, sampling and codec only. --compute-from least: each method's own least-disturbed trace; nearest: the
source's own. Each point replays the source on H hosts
with one rank each, the graph grown with the hosts (``--graph grow``: the run's generator, as many nodes per rank
as recorded; partitioned for real with METIS up to --max-real-parts, beyond by the stated extrapolation rule), links
full duplex at 0.96 goodput (a real NIC and switch port), --latency-ms one way. The break-even bandwidth of a method
is where its projected speedup over Vanilla falls to 1 (bisection on log bandwidth between 0.1 and 1000 Gbit/s),
both replayed from their traces recorded at one bandwidth (each of those >= --break-even-from, one row each).
Writes tables.md (the tables), results.json (with the command, date and machine), results.csv and one heatmap per
method.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import math
import os
import shlex
import sys
import time
import types
from pathlib import Path

from gnnq.bench.machine import describe_machine
from gnnq.projection.cluster import Cluster, recorded_cluster
from gnnq.projection.command import Point, add_speedups
from gnnq.projection.engine import AnalyticEngine
from gnnq.projection.outputs import heatmaps
from gnnq.projection.project import recorded_timelines
from gnnq.projection.scaler import Scaler
from gnnq.projection.scaling import compute_totals, with_compute_of
from gnnq.projection.trace import read_trace
from gnnq.track.progress import markdown_table

BASELINE = "adaqp_vanilla"


def sources(roots: list[Path], max_epochs: int) -> dict:
    """method -> {recorded Gbit/s: trace} of the 2-host traced runs under ``roots`` (one per method and bandwidth)."""
    out: dict = {}
    for meta in sorted(m for root in roots for m in root.rglob("trace/meta.json")):
        run = meta.parent.parent
        if not (run / "record.json").is_file() or json.loads(meta.read_text()).get("hosts") != 2:
            continue  # a run still in progress, or not a 2-host run
        t = read_trace(run)
        if t.meta["hosts"] != 2 or (t.record or {}).get("status") != "ok":
            continue
        link = float(t.meta["cluster"]["link_mbit"]) / 1000
        if link in out.get(t.label, {}):
            raise SystemExit(f"two 2-host {t.label} runs at {link:g} Gbit/s under --runs: give one pass")
        out.setdefault(t.label, {})[link] = t.limit(max_epochs)
    return out


def nearest(by_link: dict, link: float):
    return by_link[min(by_link, key=lambda b: abs(math.log(b / link)))]


def least_compute(by_link: dict):
    """The method's trace whose ranks computed least (summed compute per epoch)."""
    return min(by_link.values(), key=lambda t: sum(compute_totals(_timelines(t)).values()))


def _timelines(t):
    return recorded_timelines(t, recorded_cluster(t.meta))


class Projector:
    def __init__(self, srcs: dict, scaler: Scaler, latency_ms: float, compute_from: str):
        self.srcs, self.scaler, self.latency, self.compute_from = srcs, scaler, latency_ms, compute_from
        self.cache: dict = {}

    def point(self, method: str, hosts: int, link: float, source: float | None = None):
        """``source``: the recorded bandwidth of the trace to replay (None: the nearest to ``link``)."""
        key = (method, hosts, round(link, 9), source)
        if key not in self.cache:
            src = self.srcs[method][source] if source is not None else nearest(self.srcs[method], link)
            tls = _timelines(src)
            if self.compute_from == "vanilla":  # the same GCN on the same parts: Vanilla's model compute for all
                ref = least_compute(self.srcs[BASELINE])
            elif self.compute_from == "least":
                ref = least_compute(self.srcs[method])
            else:
                ref = src
            if ref is not src:
                tls = with_compute_of(tls, _timelines(ref))
            c = Cluster(hosts=hosts, ranks_per_host=1, link_gbit=link, latency_ms=self.latency, goodput=0.96)
            if hosts != src.meta["hosts"]:
                tls, parts = self.scaler.timelines(src, tls, c)
            else:
                parts = "recorded"
            proj = AnalyticEngine(c).run(tls)
            p = Point(str(src.run_dir), method, c, proj.epoch_s, proj.summary(), parts, "analytic")
            p.extra["source_gbit"] = float(src.meta["cluster"]["link_mbit"]) / 1000
            p.extra["compute_from"] = f"{ref.label} at {float(ref.meta['cluster']['link_mbit']) / 1000:g} Gbit/s"
            self.cache[key] = p
        return self.cache[key]

    def speedup(self, method: str, hosts: int, link: float, source: float | None = None) -> float:
        return self.point(BASELINE, hosts, link, source).epoch_s / self.point(method, hosts, link, source).epoch_s


def break_even(
    proj: Projector, method: str, hosts: int, source: float, lo: float = 0.1, hi: float = 1000.0, steps: int = 7
):
    """The bandwidth where the projected speedup falls to 1, both methods replayed from their traces recorded at
    ``source`` Gbit/s (a fixed source: the nearest-source rule would jump there): (value, 'exact'|'above'|'below')."""
    if proj.speedup(method, hosts, hi, source) >= 1:
        return hi, "above"
    if proj.speedup(method, hosts, lo, source) < 1:
        return lo, "below"
    a, b = math.log(lo), math.log(hi)
    for _ in range(steps):
        m = (a + b) / 2
        if proj.speedup(method, hosts, math.exp(m), source) >= 1:
            a = m
        else:
            b = m
    return math.exp((a + b) / 2), "exact"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=Path, nargs="+", required=True, help="folders searched for traced runs")
    p.add_argument("--out", type=Path, default=Path("results/projection/tables"))
    p.add_argument("--hosts", default="4,8,16,64,256")
    p.add_argument("--links", default="1,10,25,100")
    p.add_argument("--latency-ms", type=float, default=0.025)
    p.add_argument("--max-epochs", type=int, default=3)
    p.add_argument("--compute-from", default="vanilla", choices=("vanilla", "least", "nearest"))
    p.add_argument("--no-break-even", action="store_true")
    p.add_argument("--break-even-from", type=float, default=1.0, help="break-even from traces recorded at >= this")
    p.add_argument("--max-real-parts", type=int, default=32)
    p.add_argument("--max-real-edges", type=float, default=30e6)
    p.add_argument("--data", type=Path)
    args = p.parse_args(argv)
    hosts = [int(x) for x in args.hosts.split(",")]
    links = [float(x) for x in args.links.split(",")]
    srcs = sources(args.runs, args.max_epochs)
    if BASELINE not in srcs:
        raise SystemExit(f"no traced 2-host {BASELINE} run under {args.runs}")
    scaler = Scaler(
        types.SimpleNamespace(
            graph="grow", max_real_parts=args.max_real_parts, max_real_edges=args.max_real_edges, data=args.data
        )
    )
    proj = Projector(srcs, scaler, args.latency_ms, args.compute_from)
    methods = [BASELINE, *sorted(m for m in srcs if m != BASELINE)]
    t0 = time.perf_counter()
    points = []
    for h in hosts:
        for bw in links:
            for m in methods:
                pt = proj.point(m, h, bw)
                points.append(pt)
                print(
                    f"{m} {h} hosts {bw:g} Gbit/s: {pt.epoch_s:.3f} s ({pt.parts}; {time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    add_speedups(points, BASELINE)
    common = sorted(set.intersection(*(set(srcs[m]) for m in methods)))
    even_sources = [] if args.no_break_even else [b for b in common if b >= args.break_even_from]
    even = {
        f"{m} (from the {b:g} Gbit/s traces)": {h: break_even(proj, m, h, b) for h in hosts}
        for m in methods
        if m != BASELINE
        for b in even_sources
    }
    wall = time.perf_counter() - t0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [pt.row() for pt in points]
    for r in rows:
        r.pop("measured_epoch_s"), r.pop("measured_run"), r.pop("error")
    with open(args.out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    command = "python -m benchmarks.projection_tables " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    payload = {
        "command": command,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="minutes"),
        "label": "projected",
        "machine": describe_machine(),
        "load_average": os.getloadavg(),
        "wall_s": wall,
        "rows": rows,
        "break_even_gbit": even,
        "notes": list(dict.fromkeys(scaler.notes)),
    }
    (args.out / "results.json").write_text(json.dumps(payload, indent=1, default=str))
    pngs = heatmaps(points, BASELINE, args.out)
    (args.out / "tables.md").write_text(render(points, methods, hosts, links, even, payload))
    print(render(points, methods, hosts, links, even, payload))
    print("wrote", args.out / "tables.md", *pngs)
    return 0


def render(points, methods, hosts, links, even, payload) -> str:
    by = {(pt.method, pt.cluster.hosts, pt.cluster.link_gbit): pt for pt in points}
    lines = []
    for m in methods:
        lines += [f"### {m}: projected speedup over Vanilla (projected epoch ms)", ""]
        head = ["hosts", "parts", *[f"{bw:g} Gbit/s" for bw in links]]
        rows = []
        for h in hosts:
            cells = []
            for bw in links:
                pt = by[(m, h, bw)]
                cells.append(f"{pt.speedup:.2f}x ({pt.epoch_s * 1e3:.0f})")
            rows.append([h, by[(m, h, links[0])].parts, *cells])
        lines += [markdown_table(head, rows), ""]
    lines += ["### Break-even bandwidth (projected): above it the method is slower than Vanilla", ""]
    head = ["method", *[f"{h} hosts" for h in hosts]]
    rows = []
    for m, per in even.items():
        cells = []
        for h in hosts:
            v, kind = per[h]
            cells.append(
                f"> {v:g} Gbit/s" if kind == "above" else f"< {v:g} Gbit/s" if kind == "below" else f"{v:.3g} Gbit/s"
            )
        rows.append([m, *cells])
    lines += [markdown_table(head, rows), ""]
    if payload["notes"]:
        lines += ["Notes:", ""] + [f"- {n}" for n in payload["notes"]] + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
