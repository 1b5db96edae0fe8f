"""Peer strategies side by side: Vanilla, PipeGCN, PipeQS, BNS-GCN, AdaQP and the mini-batch reference.

    python -m gnnq.bench.peers --data DIR --out results/peers [--target-drop 0.01] [-- OVERRIDES...]

Runs ``gnnq -m --config-dir sweeps --config-name peers OVERRIDES`` (every distributed strategy on
the same data, partitions, model and optimizer) and then the single-process mini-batch reference
with the same file and overrides (``experiment=minibatch cluster.nproc=1``). Tabulates per run the
median epoch time and exposed communication time, halo bytes per training epoch, the training
time until validation accuracy first reaches the target (Vanilla's best minus ``--target-drop``),
and the test accuracy at the best validation epoch; plots validation accuracy against training
time for every strategy (PNG and SVG).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from gnnq.bench.gnnq_runs import command_line, run_gnnq
from gnnq.bench.machine import describe_machine
from gnnq.config.compose import CONF_DIR
from gnnq.report.curves import read_curve, time_to_target
from gnnq.report.plots import plot_curves
from gnnq.track.progress import markdown_table

SWEEP = ["--config-dir", str(CONF_DIR.parent / "sweeps"), "--config-name", "peers"]


def strategy_label(config: dict) -> str:
    """A short name for a run's strategy, from its config."""
    p, q = config["parallel"], config["quantizer"]
    quant = "" if q["name"] == "fp32" else f" + {q['bits']}-bit" if q["name"] == "uniform" else " + adaptive bits"
    if p["name"] == "sync":
        return "Vanilla" + quant
    if p["name"] == "stale":
        base = "PipeGCN" if q["name"] == "fp32" else "PipeQS (stale"
        smooth = f", smoothed {p['momentum']:g}" if p["momentum"] else ""
        return f"{base}{smooth}" + ("" if q["name"] == "fp32" else quant + ")")
    if p["name"] == "sampling":
        return f"BNS-GCN (p={p['sampling_rate']:g})" + quant
    if p["name"] == "overlap":
        return "AdaQP" if q["name"] == "adaptive" else "AdaQP-p" + quant
    if p["name"] == "minibatch":
        return f"Mini-batch (fanouts {list(p['fanouts'])}, batch {p['batch_size']})"
    return p["name"] + quant


def tabulate(records: list[dict], target_drop: float) -> tuple[list[dict], float]:
    vanilla = next((r for r in records if strategy_label(r["config"]) == "Vanilla"), None)
    if vanilla is None:
        raise RuntimeError("no Vanilla run (parallel=sync, quantizer=fp32) to compare with")
    target = vanilla["summary"]["best_val"] - target_drop
    rows = []
    for rec in records:
        s, curve = rec["summary"], read_curve(rec["run_dir"])
        rows.append({
            "strategy": strategy_label(rec["config"]),
            "ranks": s["world_size"],
            "epoch_time_s": s["epoch_time_s"],
            "comm_time_s": s["comm_time_s"],
            "comm_bytes_per_epoch": s["comm_bytes_per_epoch"],
            "time_to_target_s": time_to_target(curve, target),
            "best_val": s["best_val"],
            "test": s["test"],
            "curve": curve,
        })  # fmt: skip
    base = rows[records.index(vanilla)]
    for row in rows:
        row["epoch_time_vs_vanilla"] = row["epoch_time_s"] / base["epoch_time_s"]
        row["bytes_vs_vanilla"] = row["comm_bytes_per_epoch"] / base["comm_bytes_per_epoch"] if base["comm_bytes_per_epoch"] else None
    return rows, target


def _fmt(value, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value * scale, spec)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="data root (synthetic graphs are generated and cached there)")
    p.add_argument("--out", type=Path, default=Path("results/peers"))
    p.add_argument("--target-drop", type=float, default=0.01, help="target = Vanilla's best validation accuracy minus this")
    p.add_argument("--no-minibatch", action="store_true", help="skip the single-process mini-batch reference")
    p.add_argument("overrides", nargs="*", help="extra gnnq overrides for every run (after --)")
    args = p.parse_args(argv)
    command = command_line("gnnq.bench.peers", argv)
    runs = Path(tempfile.mkdtemp(prefix="gnnq-peers-"))
    records = run_gnnq(["-m", *SWEEP, *args.overrides], args.data, runs / "sweep")
    print(f"{len(records)} distributed runs done", flush=True)
    if not args.no_minibatch:
        records += run_gnnq([*SWEEP, *args.overrides, "experiment=minibatch", "cluster.nproc=1"], args.data, runs / "minibatch")
        print("mini-batch reference done", flush=True)
    bad = [r for r in records if r["status"] != "ok"]
    if bad:
        raise RuntimeError(f"{len(bad)} run(s) failed: {[r.get('error') for r in bad]}")
    rows, target = tabulate(records, args.target_drop)
    machine = describe_machine()
    cfg = records[0]["config"]
    d = cfg["dataset"]
    data_desc = f"{d['name']}" + (f", {d['num_nodes']:,} nodes, average degree {d['avg_degree']}" if d["name"] == "synthetic" else "")
    args.out.mkdir(parents=True, exist_ok=True)
    series = [(r["strategy"], r["curve"]) for r in rows]
    plots = plot_curves(series, args.out, "val_vs_time", f"{data_desc}: validation accuracy vs training time", target)
    (args.out / "results.json").write_text(json.dumps({"command": command, "machine": machine, "target": target,
                                                       "rows": rows, "records": records}, indent=1, default=str))  # fmt: skip
    md = [
        "# Peer strategies side by side", "", f"Command: `{command}`", "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, torch {machine['torch']}, CUDA {'yes' if machine['cuda'] else 'no'}.",
        "",
        f"Data: {data_desc}; {cfg['cluster']['nproc']} ranks (METIS, seed {cfg['partitioner']['seed']}) for the distributed "
        f"strategies, one process for the mini-batch reference; {cfg['model']['name']} {cfg['model']['layers']} layers, "
        f"hidden {cfg['model']['hidden']}; {cfg['trainer']['epochs']} epochs, evaluated every {cfg['trainer']['eval_every']}; "
        f"seed {cfg['trainer']['seed']}. Target validation accuracy {target:.4f} (Vanilla's best minus {args.target_drop}).",
        "",
        markdown_table(
            ["strategy", "ranks", "epoch ms", "vs Vanilla", "comm ms (exposed)", "halo MB / epoch", "bytes vs Vanilla",
             "time to target s", "best val", "test acc"],
            [[r["strategy"], r["ranks"], _fmt(r["epoch_time_s"], ".1f", 1e3), f"{r['epoch_time_vs_vanilla']:.2f}x",
              _fmt(r["comm_time_s"], ".1f", 1e3), _fmt(r["comm_bytes_per_epoch"], ".2f", 1e-6), _fmt(r["bytes_vs_vanilla"], ".3f"),
              _fmt(r["time_to_target_s"], ".1f"), _fmt(r["best_val"], ".4f"), _fmt(r["test"], ".4f")] for r in rows],
        ),
        "",
        "Epoch time: median over epochs of the slowest rank's training step (for the mini-batch reference: one pass over "
        "the training nodes, sampling included). Comm: time the training thread spent blocked in halo and gradient "
        "communication. Halo bytes: put on the wire per training epoch, all ranks. Time to target: summed training "
        "epoch times (evaluation excluded) until the first evaluated epoch whose validation accuracy reaches the target "
        "('-': never). Test accuracy: at the best validation epoch.",
        "",
        f"Plot: {', '.join(p.name for p in plots)}",
        "",
    ]  # fmt: skip
    (args.out / "README.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
