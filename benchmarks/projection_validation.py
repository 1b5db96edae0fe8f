"""Validation of gnnq-bench project against the emulated cluster (issue 33): predicted vs measured epoch times.

    python -m benchmarks.projection_validation --runs DIR --out results/projection/validation [--engines E1,E2]

DIR holds traced runs (any depth; each with trace/ and record.json), e.g. the 2-host runs at 100 Mbit/s, 1 and
10 Gbit/s and the 4-host runs at 1 Gbit/s of results/projection/validation/run.sh. Every 2-host run is projected onto
every setting at which a run of the same method was measured: its own (the diagonal), the other bandwidths, and 4
hosts (its graph split into 4 parts with the run's partitioner: --graph same, the 4-host runs' own graph). Each model
variant (engine, link model) is scored by the absolute relative error against the measured epoch time (record.json:
median over epochs of the slowest rank). The 4-host points are projected twice: onto real 1-core hosts, and with the
4-host runs' measured cores per host as the compute speed (their oversubscription). Writes results.json and
README.md (the command, the machine, the tables); the per-variant wall time of the projections is the engine's cost.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import shlex
import statistics
import sys
import time
import types
from pathlib import Path

from gnnq.bench.machine import describe_machine
from gnnq.projection.cluster import EMULATED, recorded_cluster
from gnnq.projection.command import own_epoch_s, project_run
from gnnq.projection.scaler import Scaler
from gnnq.projection.trace import read_trace
from gnnq.track.progress import markdown_table

# name -> (engine, simgrid model, cluster changes). The emulated cluster's links: bidirectional TCP through its token
# buckets gets about half a link each way (docs/projection.md#validation), payload 0.96 of the bandwidth. The same
# changes describe the recorded cluster (--recorded-cluster): with comm_interference, the traces' compute is cleaned.
HALF = {"duplex": "half", "goodput": 0.96}
VARIANTS = {
    "analytic, half duplex": ("analytic", None, HALF),
    "analytic, emulated (half duplex, interference)": ("analytic", None, EMULATED),
    "analytic, full duplex": ("analytic", None, {"duplex": "full", "goodput": 0.96}),
    "SimGrid LV08, half duplex": ("simgrid", "LV08", HALF),
    "SimGrid CM02, half duplex": ("simgrid", "CM02", HALF),
}


def traced_runs(roots: list[Path]) -> list:
    out = []
    for meta in sorted(m for root in roots for m in root.rglob("trace/meta.json")):
        run = meta.parent.parent
        if not (run / "record.json").is_file():
            continue
        t = read_trace(run)
        if (t.record or {}).get("status") == "ok":
            out.append(t)
    return out


def setting(t) -> tuple[int, float]:
    return int(t.meta["hosts"]), float(t.meta["cluster"]["link_mbit"]) / 1000


def cores(t) -> dict:
    return ((t.record.get("summary") or {}).get("emulated") or {}).get("cores") or {}


def project_one(trace, hosts: int, link: float, engine: str, model: str | None, changes: dict, scaler) -> dict:
    args = types.SimpleNamespace(engine=engine, simgrid_model=model or "LV08", recorded_model=changes)
    rec = recorded_cluster(trace.meta)
    cluster = rec.with_(hosts=hosts, link_gbit=link, **changes)
    t0 = time.perf_counter()
    (point,) = project_run(trace, [cluster], args, scaler)
    return {"epoch_s": point.epoch_s, **point.breakdown, "parts": point.parts, "wall_s": time.perf_counter() - t0}


def _err(pred: float, meas: float) -> float:
    return (pred - meas) / meas


def summarize(rows: list[dict]) -> dict:
    groups = {
        "2 hosts, own setting": [r for r in rows if r["hosts"] == 2 and r["own"]],
        "2 hosts, other bandwidths": [r for r in rows if r["hosts"] == 2 and not r["own"]],
        "2 hosts, all": [r for r in rows if r["hosts"] == 2],
        "2 hosts, other bandwidths, compute matched": [r for r in rows if r["hosts"] == 2 and not r["own"]],
        "4 hosts": [r for r in rows if r["hosts"] == 4],
        "4 hosts, compute matched": [r for r in rows if r["hosts"] == 4],
        "4 hosts, compute at the measured cores/host": [r for r in rows if r["hosts"] == 4 and "error_oversub" in r],
    }
    out = {}
    for name, rs in groups.items():
        key = "error_oversub" if "cores/host" in name else "error_compute_matched" if "matched" in name else "error"
        errs = [abs(r[key]) for r in rs if r.get(key) is not None]
        if errs:
            out[name] = {"points": len(errs), "median": statistics.median(errs), "worst": max(errs)}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=Path, nargs="+", required=True, help="folders searched for traced runs")
    p.add_argument("--out", type=Path, default=Path("results/projection/validation"))
    p.add_argument("--engines", default="analytic,simgrid")
    p.add_argument(
        "--fit-interference",
        help="comma-separated comm_interference values: one more analytic half-duplex variant each (the fit)",
    )
    p.add_argument("--data", type=Path)
    args = p.parse_args(argv)
    engines = args.engines.split(",")
    runs = traced_runs(args.runs)
    measured: dict = {}
    for t in runs:
        measured.setdefault((t.label, *setting(t)), []).append(t)
    sources = [t for t in runs if setting(t)[0] == 2]
    scaler = Scaler(types.SimpleNamespace(graph="same", max_real_parts=16, max_real_edges=20e6, data=args.data))
    results = {}
    variants = dict(VARIANTS)
    for k in (float(x) for x in (args.fit_interference or "").split(",") if x.strip()):
        variants[f"analytic, half duplex, interference {k:g}"] = ("analytic", None, {**HALF, "comm_interference": k})
    for name, (engine, model, changes) in variants.items():
        if engine not in engines:
            continue
        rows = []
        wall = 0.0
        for src in sources:
            targets = sorted({(h, bw) for (m, h, bw) in measured if m == src.label})
            for hosts, link in targets:
                meas_runs = measured[(src.label, hosts, link)]
                meas = statistics.median(own_epoch_s(t) for t in meas_runs)
                meas_compute = statistics.median(_trace_compute(t) for t in meas_runs)
                got = project_one(src, hosts, link, engine, model, changes, scaler)
                wall += got["wall_s"]
                row = {
                    "method": src.label,
                    "from_gbit": setting(src)[1],
                    "hosts": hosts,
                    "link_gbit": link,
                    "own": (hosts, link) == setting(src),
                    "projected_s": got["epoch_s"],
                    "projected_compute_s": got["compute_s"],
                    "measured_s": meas,
                    "error": _err(got["epoch_s"], meas),
                    "measured_compute_s": meas_compute,
                    # the same projection with the measured run's own compute: the error of the communication model
                    "error_compute_matched": _err(meas_compute + got["exposed_comm_s"], meas),
                    "parts": got["parts"],
                    "measured_runs": [str(t.run_dir) for t in meas_runs],
                }
                if hosts != 2:
                    c = cores(meas_runs[0])
                    row["measured_cores_per_host"] = c.get("cores_per_host")
                    row["measured_oversubscribed"] = c.get("oversubscribed")
                    if c.get("cores_per_host"):
                        speed = min(1.0, float(c["cores_per_host"]))
                        adj = project_one(src, hosts, link, engine, model, {**changes, "compute_speed": speed}, scaler)
                        wall += adj["wall_s"]
                        row["projected_oversub_s"] = adj["epoch_s"]
                        row["error_oversub"] = _err(adj["epoch_s"], meas)
                rows.append(row)
                print(
                    f"[{name}] {src.label} {setting(src)[1]:g} -> {hosts}h {link:g}: "
                    f"{got['epoch_s']:.3f} vs {meas:.3f} ({row['error']:+.1%})",
                    flush=True,
                )
        results[name] = {"rows": rows, "summary": summarize(rows), "projection_wall_s": wall}
    compute = [
        {
            "method": t.label,
            "hosts": setting(t)[0],
            "link_gbit": setting(t)[1],
            "epoch_s": own_epoch_s(t),
            "trace_compute_s": _trace_compute(t),
            "cores_per_host": cores(t).get("cores_per_host"),
            "oversubscribed": cores(t).get("oversubscribed"),
        }
        for t in runs
    ]
    command = "python -m benchmarks.projection_validation " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    args.out.mkdir(parents=True, exist_ok=True)
    payload = {
        "command": command,
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="minutes"),
        "machine": describe_machine(),
        "load_average": os.getloadavg(),
        "variants": results,
        "recorded_compute": compute,
        "notes": scaler.notes,
    }
    (args.out / "results.json").write_text(json.dumps(payload, indent=1, default=str))
    (args.out / "tables.md").write_text(render(payload))
    print(render(payload))
    return 0


def _trace_compute(t) -> float:
    """Median over epochs of the slowest rank's compute events (what the trace says the rank computed)."""
    per_epoch = []
    for e in range(t.num_epochs):
        per_epoch.append(
            max(
                sum(ev["t1"] - ev["t0"] for ev in t.epochs[r][e]["events"] if ev["op"] == "compute")
                for r in range(t.world_size)
            )
        )
    return statistics.median(per_epoch)


def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:+.1%}"


def render(payload: dict) -> str:
    lines = []
    for name, res in payload["variants"].items():
        lines += [f"### {name}", "", f"Projection wall time, all points: {res['projection_wall_s']:.1f} s", ""]
        head = ["summary", "points", "median |error|", "worst |error|"]
        lines.append(
            markdown_table(
                head, [[k, v["points"], f"{v['median']:.1%}", f"{v['worst']:.1%}"] for k, v in res["summary"].items()]
            )
        )
        lines.append("")
        head = [
            "method",
            "traced at Gbit/s",
            "hosts",
            "Gbit/s",
            "projected s",
            "measured s",
            "error",
            "projected at measured cores/host s",
            "error",
        ]
        rows = [
            [
                r["method"],
                f"{r['from_gbit']:g}",
                r["hosts"],
                f"{r['link_gbit']:g}" + (" (own)" if r["own"] else ""),
                f"{r['projected_s']:.3f}",
                f"{r['measured_s']:.3f}",
                _pct(r["error"]),
                f"{r['projected_oversub_s']:.3f}" if "projected_oversub_s" in r else "-",
                _pct(r.get("error_oversub")),
            ]
            for r in res["rows"]
        ]
        lines += [markdown_table(head, rows), ""]
    head = [
        "method",
        "hosts",
        "Gbit/s",
        "measured epoch s",
        "traced compute s (slowest rank)",
        "cores/host",
        "oversubscribed",
    ]
    rows = [
        [
            c["method"],
            c["hosts"],
            f"{c['link_gbit']:g}",
            f"{c['epoch_s']:.3f}",
            f"{c['trace_compute_s']:.3f}",
            c["cores_per_host"],
            c["oversubscribed"],
        ]
        for c in sorted(payload["recorded_compute"], key=lambda c: (c["method"], c["hosts"], c["link_gbit"]))
    ]
    lines += ["### The measured runs: epoch and the compute their traces hold", "", markdown_table(head, rows), ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
