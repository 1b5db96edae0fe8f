"""gnnq-bench project: project traced runs onto modelled clusters.

    gnnq-bench project RUN_DIR... [--hosts 2,4] [--ranks-per-host P] [--link-gbit 1,10] [--latency-ms 0.05]
                       [--intra-gbit 100] [--compute-speed 1] [--duplex full|half] [--goodput 1]
                       [--interference 0] [--cluster FILE|emulated] [--recorded-cluster FILE|emulated]
                       [--engine analytic|simgrid]
                       [--graph grow|same] [--baseline METHOD] [--measured DIR...] [--out DIR] [--data DIR]

Each RUN_DIR is a run recorded with tracing on (its trace/). Every run is projected onto every point of the grid
hosts x link bandwidths (default: the run's own cluster). A point with the run's own hosts and ranks replays the
recorded ranks; any other host count replays each recorded rank's timeline scaled to the parts of the graph split for
that many ranks (``--graph grow``: the graph grows with the ranks, as many nodes per rank as recorded; ``same``: the
recorded graph). Prints a table; with ``--out`` writes results.json, results.csv, README.md and, for a grid of more
than one host count and bandwidth, heatmaps of each method's projected speedup over ``--baseline``.
``--recorded-cluster``: what the traces cannot tell about the cluster they were recorded on (duplex, goodput,
comm_interference; ``emulated``: gnnq's emulated cluster as validated): it calibrates the all-reduce's overhead and,
with comm_interference > 0, takes the slowdown the run's own messages caused out of its compute (project.py).
``--measured DIR...``: traced or recorded runs whose measured epoch times stand beside the projections of the same
method at the same hosts, ranks per host and bandwidth (validation).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gnnq.errors import ConfigError, GnnqError
from gnnq.projection.cluster import Cluster, read_cluster_file, recorded_cluster
from gnnq.projection.outputs import print_table, write_outputs
from gnnq.projection.project import ENGINES, make_engine, project_recorded, recorded_timelines
from gnnq.projection.scaler import Scaler
from gnnq.projection.tensor3d import grid_timelines, is_grid_trace, plexus_model_epoch_s
from gnnq.projection.trace import Trace, read_trace

GRAPH_MODES = ("grow", "same")


@dataclass
class Point:
    run: str
    method: str
    cluster: Cluster
    epoch_s: float
    breakdown: dict
    parts: str  # "recorded" | "real K" | "extrapolated"
    engine: str
    measured_s: float | None = None
    measured_from: str | None = None
    speedup: float | None = None
    extra: dict = field(default_factory=dict)

    def row(self) -> dict:
        err = (self.epoch_s - self.measured_s) / self.measured_s if self.measured_s else None
        return {
            "run": self.run,
            "method": self.method,
            "hosts": self.cluster.hosts,
            "ranks_per_host": self.cluster.ranks_per_host,
            "link_gbit": self.cluster.link_gbit,
            "latency_ms": self.cluster.latency_ms,
            "compute_speed": self.cluster.compute_speed,
            "engine": self.engine,
            "parts": self.parts,
            "projected_epoch_s": self.epoch_s,
            **{f"projected_{k}": v for k, v in self.breakdown.items() if k != "epoch_s"},
            "projected_speedup": self.speedup,
            "measured_epoch_s": self.measured_s,
            "measured_run": self.measured_from,
            "error": err,
            **self.extra,
        }


def _floats(text: str, name: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"{name} {text!r}: give numbers separated by commas, e.g. 1,10,25") from None
    if not vals:
        raise ConfigError(f"{name} {text!r}: give at least one number")
    return vals


def _ints(text: str, name: str) -> list[int]:
    vals = _floats(text, name)
    if any(v != int(v) or v < 1 for v in vals):
        raise ConfigError(f"{name} {text!r}: give positive whole numbers separated by commas, e.g. 2,4,8")
    return [int(v) for v in vals]


def parse_args(argv: list[str]):
    p = argparse.ArgumentParser(
        prog="gnnq-bench project", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("runs", nargs="+", type=Path, help="run directories recorded with tracing on")
    p.add_argument("--hosts", help="host counts, comma-separated (default: each run's own)")
    p.add_argument("--ranks-per-host", type=int, help="ranks per host (default: each run's own)")
    p.add_argument("--link-gbit", help="link bandwidths in Gbit/s, comma-separated (default: each run's own)")
    p.add_argument("--latency-ms", type=float, help="one-way latency between hosts (default: the run's own)")
    p.add_argument("--intra-gbit", type=float, help="bandwidth between ranks of one host (default 100)")
    p.add_argument("--compute-speed", type=float, help="compute speed relative to the traced device (default 1)")
    p.add_argument("--duplex", help="full (default: separate up- and downlinks) or half (one shared link per host)")
    p.add_argument("--goodput", type=float, help="payload share of a link's bandwidth (default 1)")
    p.add_argument(
        "--interference", type=float, help="compute slowdown while a host's messages move: 1 + this (default 0)"
    )
    p.add_argument(
        "--cluster", type=Path, help="a cluster file (JSON or 'key: value' lines) with any of the above, or: emulated"
    )
    p.add_argument(
        "--recorded-cluster",
        type=Path,
        help="the recording cluster's duplex, goodput, comm_interference: a cluster file or emulated (default: none)",
    )
    p.add_argument("--engine", default="analytic", help=f"one of {', '.join(ENGINES)} (default %(default)s)")
    p.add_argument("--simgrid-model", default="LV08", help="SimGrid's network model: LV08 (default) or CM02")
    p.add_argument("--graph", default="grow", help="for other host counts: grow (default) or same")
    p.add_argument("--baseline", default="adaqp_vanilla", help="the method speedups are against (default %(default)s)")
    p.add_argument("--measured", nargs="*", type=Path, default=[], help="measured runs to compare with")
    p.add_argument("--max-real-parts", type=int, default=16, help="partition for real up to this many parts (16)")
    p.add_argument("--max-real-edges", type=float, default=20e6, help="... and graphs up to this many edges (20e6)")
    p.add_argument("--max-epochs", type=int, help="replay only the first N traced epochs (large clusters: faster)")
    p.add_argument("--out", type=Path, help="write results.json, results.csv, README.md and heatmaps here")
    p.add_argument("--data", type=Path, help="data root for the partitions (default: the run's, or $GNNQ_DATA)")
    args = p.parse_args(argv)
    if args.engine not in ENGINES:
        p.error(f"--engine {args.engine!r}: allowed: {', '.join(ENGINES)}")
    if args.graph not in GRAPH_MODES:
        p.error(f"--graph {args.graph!r}: allowed: {', '.join(GRAPH_MODES)}")
    return args


def _cluster_options(args) -> dict:
    opts = read_cluster_file(args.cluster) if args.cluster else {}
    for key in ("ranks_per_host", "latency_ms", "intra_gbit", "compute_speed", "duplex", "goodput"):
        if getattr(args, key) is not None:
            opts[key] = getattr(args, key)
    if args.interference is not None:
        opts["comm_interference"] = args.interference
    return opts


def grid(trace: Trace, args) -> list[Cluster]:
    """The clusters to project ``trace`` onto: hosts x bandwidths, the rest from the options or the recording."""
    opts = _cluster_options(args)
    base = {"hosts": int(trace.meta["hosts"]), "ranks_per_host": int(trace.meta["ranks_per_host"])}
    link = (trace.meta.get("cluster") or {}).get("link_mbit")
    base["latency_ms"] = float((trace.meta.get("cluster") or {}).get("latency_ms") or 0.0)
    if link:
        base["link_gbit"] = float(link) / 1000
    base.update({k: v for k, v in opts.items() if k not in ("hosts", "link_gbit")})
    hosts = _ints(args.hosts, "--hosts") if args.hosts else [opts.get("hosts", base["hosts"])]
    if args.link_gbit:
        links = _floats(args.link_gbit, "--link-gbit")
    elif "link_gbit" in opts:
        links = [float(opts["link_gbit"])]
    elif "link_gbit" in base:
        links = [base["link_gbit"]]
    else:
        raise ConfigError(f"{trace.run_dir}: recorded without a shaped link; give --link-gbit")
    return [Cluster(**{**base, "hosts": h, "link_gbit": bw}) for h in hosts for bw in links]


def measured_runs(dirs: list[Path]) -> list[dict]:
    """(method, hosts, ranks per host, link Gbit/s, epoch s, run dir) of every run under ``dirs``."""
    out = []
    for d in dirs:
        if not d.exists():
            raise ConfigError(f"--measured {d}: no such directory")
        own = d / "trace" / "meta.json"
        metas = [own] if own.exists() else sorted(d.rglob("trace/meta.json"))
        for meta_path in metas:
            t = read_trace(meta_path.parent.parent)
            rec = t.record or {}
            epoch = rec.get("epoch_time_s") if rec.get("status") == "ok" else None
            out.append(
                {
                    "method": t.label,
                    "hosts": int(t.meta["hosts"]),
                    "ranks_per_host": int(t.meta["ranks_per_host"]),
                    "link_gbit": ((t.meta.get("cluster") or {}).get("link_mbit") or 0) / 1000,
                    "epoch_s": epoch if epoch is not None else t.measured_epoch_s(),
                    "source": "record.json" if epoch is not None else "trace",
                    "run": str(t.run_dir),
                    "oversubscribed": ((rec.get("summary") or {}).get("emulated") or {})
                    .get("cores", {})
                    .get("oversubscribed"),
                }
            )
    return out


def _match(measured: list[dict], method: str, c: Cluster) -> list[dict]:
    return [
        m
        for m in measured
        if m["method"] == method
        and m["hosts"] == c.hosts
        and m["ranks_per_host"] == c.ranks_per_host
        and abs(m["link_gbit"] - c.link_gbit) < 1e-9 * max(1.0, c.link_gbit)
    ]


def project_run(trace: Trace, clusters: list[Cluster], args, scaler) -> list[Point]:
    model = getattr(args, "recorded_model", None) or {}  # --recorded-cluster's fields
    try:
        recorded = recorded_cluster(trace.meta, model)
    except ConfigError:
        if model:
            raise ConfigError(
                f"{trace.run_dir}: --recorded-cluster describes the cluster a run was traced on, and this run was "
                "traced on no shaped link (cluster.link_mbit is null); leave --recorded-cluster out for it"
            ) from None
        recorded = None
    points = []
    grid = is_grid_trace(trace)
    for c in clusters:
        if c.hosts == trace.meta["hosts"] and c.ranks_per_host == trace.meta["ranks_per_host"]:
            proj = project_recorded(trace, c, recorded, args.engine, args.simgrid_model)
            parts = "recorded"
        elif grid:  # the grid Plexus's rule picks for these ranks, its timelines rebuilt (projection/tensor3d.py)
            timelines, used = grid_timelines(trace, recorded_timelines(trace, recorded), c, args.graph)
            proj = make_engine(args.engine, c, None, args.simgrid_model).run(timelines)
            parts = f"grid {used['grid']}"
        else:
            timelines, parts = scaler.timelines(trace, recorded_timelines(trace, recorded), c)
            proj = make_engine(args.engine, c, None, args.simgrid_model).run(timelines)
        point = Point(str(trace.run_dir), trace.label, c, proj.epoch_s, proj.summary(), parts, args.engine)
        point.extra["family"] = "grid" if grid else "partition"
        if grid and parts != "recorded":
            point.extra |= {"grid": used["grid"], "grid_collective_overhead_s": used["collective_overhead_s"]}
            point.extra |= plexus_model_epoch_s(used, c)
        if recorded is not None and parts == "recorded" and abs(c.link_gbit - recorded.link_gbit) < 1e-9:
            point.measured_s, point.measured_from = own_epoch_s(trace), f"{trace.run_dir} (itself)"
        points.append(point)
    return points


def failed_run_note(trace: Trace) -> str | None:
    """What to say of a traced run that did not finish (its record failed, or none: it was killed); None if it
    did."""
    rec = trace.record or {}
    if rec.get("status") == "ok":
        return None
    why = f"it failed: {rec.get('error')}" if rec else "it left no record.json (it did not finish)"
    return (
        f"{trace.run_dir} is not a finished run ({why}); its projection is from the {trace.num_epochs} epoch(s) "
        "its trace holds before that"
    )


def own_epoch_s(trace: Trace) -> float:
    """The run's measured epoch time: its record's (median over epochs of the slowest rank), else the trace's."""
    rec = trace.record or {}
    if rec.get("status") == "ok" and rec.get("epoch_time_s"):
        return float(rec["epoch_time_s"])
    return trace.measured_epoch_s()


def add_speedups(points: list[Point], baseline: str) -> None:
    def key(p: Point):
        return (p.cluster.hosts, p.cluster.ranks_per_host, p.cluster.link_gbit, p.cluster.compute_speed)

    base: dict = {}
    for p in points:
        if p.method == baseline:
            base.setdefault(key(p), []).append(p.epoch_s)
    for p in points:
        if key(p) in base:
            p.speedup = statistics.median(base[key(p)]) / p.epoch_s


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = "gnnq-bench project " + " ".join(argv)
    try:
        args.recorded_model = (
            read_cluster_file(args.recorded_cluster, "--recorded-cluster") if args.recorded_cluster else {}
        )
        traces = [read_trace(d).limit(args.max_epochs) for d in args.runs]
        measured = measured_runs(args.measured)
        scaler = Scaler(args)
        for t in traces:
            failed = failed_run_note(t)
            if failed:
                print(f"gnnq-bench project: warning: {failed}", file=sys.stderr, flush=True)
                scaler.notes.append(failed)
        points: list[Point] = []
        for t in traces:
            points += project_run(t, grid(t, args), args, scaler)
        for p in points:
            found = _match(measured, p.method, p.cluster)
            if found and p.measured_s is None:
                p.measured_s = statistics.median(m["epoch_s"] for m in found)
                p.measured_from = ", ".join(m["run"] for m in found)
                p.extra["measured_oversubscribed"] = any(bool(m.get("oversubscribed")) for m in found)
        add_speedups(points, args.baseline)
        print_table(points)
        if args.out:
            paths = write_outputs(args.out, command, points, args, scaler.notes)
            print(f"[gnnq-bench project] wrote {', '.join(str(p) for p in paths)}")
    except GnnqError as exc:
        print(f"gnnq-bench project: {exc}", file=sys.stderr)
        return 2
    return 0
