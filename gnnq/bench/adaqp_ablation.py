"""AdaQP's ablation side by side: Vanilla, AdaQP-q, AdaQP-p, AdaQP in one benchmark run.

    python -m gnnq.bench.adaqp_ablation --data DIR --out results/adaqp_ablation [--repeats 2] [-- OVERRIDES...]

Runs ``gnnq -m --config-dir sweeps --config-name adaqp_ablation`` (the four experiment presets,
4 ranks, the 200k-node synthetic graph) ``--repeats`` times, the four modes interleaved in
every repeat, and tabulates medians over repeats of each run's median epoch time and
communication time, bytes per epoch, test accuracy and total solver time, with ratios to
Vanilla. On one loopback machine communication is cheap, so this shows overheads honestly;
bandwidth-limited comparisons need the emulated cluster.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from gnnq.bench.gnnq_runs import command_line, run_gnnq
from gnnq.bench.machine import describe_machine
from gnnq.config.compose import CONF_DIR
from gnnq.track.progress import markdown_table

MODES = {"adaqp_vanilla": "Vanilla", "adaqp_q": "AdaQP-q", "adaqp_p": "AdaQP-p", "adaqp": "AdaQP"}


def run_modes(data: Path, runs: Path, overrides: list[str]) -> dict[str, dict]:
    sweep = ["-m", "--config-dir", str(CONF_DIR.parent / "sweeps"), "--config-name", "adaqp_ablation", *overrides]
    by_mode = {_mode(rec["config"]): rec for rec in run_gnnq(sweep, data, runs)}
    missing = set(MODES) - set(by_mode)
    if missing:
        raise RuntimeError(f"the sweep produced no record for {sorted(missing)}")
    return by_mode


def _mode(config: dict) -> str:
    overlap = config["parallel"]["name"] == "overlap"
    adaptive = config["quantizer"]["name"] == "adaptive"
    return {(False, False): "adaqp_vanilla", (False, True): "adaqp_q", (True, False): "adaqp_p", (True, True): "adaqp"}[
        (overlap, adaptive)
    ]


def summarize(repeats: list[dict[str, dict]]) -> list[dict]:
    def med(mode, get):
        vals = [get(rep[mode]) for rep in repeats]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    rows = []
    for mode, label in MODES.items():
        adaptive = lambda r: (r.get("summary", {}).get("adaptive") or {})  # noqa: E731
        rows.append({
            "mode": label,
            "parallel": repeats[0][mode]["config"]["parallel"]["name"],
            "quantizer": repeats[0][mode]["config"]["quantizer"]["name"],
            "epoch_time_s": med(mode, lambda r: r["epoch_time_s"]),
            "comm_time_s": med(mode, lambda r: r["comm_time_s"]),
            "comm_bytes_per_epoch": med(mode, lambda r: r["comm_bytes_per_epoch"]),
            "test": med(mode, lambda r: r["test"]),
            "solver_time_s": med(mode, lambda r: adaptive(r).get("solve_time_s_total")),
            "assign_time_s": med(mode, lambda r: sum(a["assign_time_s"] for a in adaptive(r).get("assignments", [])) or None),
            "bits_histogram": (adaptive(repeats[0][mode]).get("assignments") or [{}])[-1].get("bits_histogram"),
        })  # fmt: skip
    base = rows[0]
    for row in rows:
        row["epoch_time_vs_vanilla"] = row["epoch_time_s"] / base["epoch_time_s"]
        row["bytes_vs_vanilla"] = row["comm_bytes_per_epoch"] / base["comm_bytes_per_epoch"]
    return rows


def _fmt(value, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value * scale, spec)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="data root (the synthetic graph is generated and cached there)")
    p.add_argument("--out", type=Path, default=Path("results/adaqp_ablation"))
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("overrides", nargs="*", help="extra gnnq overrides for every run (after --)")
    args = p.parse_args(argv)
    command = command_line("gnnq.bench.adaqp_ablation", argv)
    runs = Path(tempfile.mkdtemp(prefix="gnnq-ablation-"))
    repeats = []
    for i in range(args.repeats):
        repeats.append(run_modes(args.data, runs / f"repeat{i}", args.overrides))
        print(f"repeat {i + 1}/{args.repeats} done", flush=True)
    rows = summarize(repeats)
    machine = describe_machine()
    cfg = repeats[0]["adaqp"]["config"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"command": command, "machine": machine, "rows": rows,
                                                       "records": repeats}, indent=1, default=str))  # fmt: skip
    md = [
        "# AdaQP ablation", "", f"Command: `{command}`", "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, torch {machine['torch']}, CUDA {'yes' if machine['cuda'] else 'no'}.",
        "",
        f"Graph: synthetic, {cfg['dataset']['num_nodes']:,} nodes, average degree {cfg['dataset']['avg_degree']}; "
        f"{cfg['cluster']['nproc']} ranks (METIS); {cfg['model']['name']} {cfg['model']['layers']} layers, hidden "
        f"{cfg['model']['hidden']}; {cfg['trainer']['epochs']} epochs; adaptive: bits {cfg['quantizer']['bit_choices']}, "
        f"group size {cfg['quantizer']['group_size']}, lambda {cfg['quantizer']['variance_weight']}, reassigned every "
        f"{cfg['quantizer']['assign_cycle']} epochs ({cfg['quantizer']['solver']} solver), first cycle at "
        f"{cfg['quantizer']['bits']} bits. Medians over {args.repeats} repeat(s), modes interleaved.",
        "",
        markdown_table(
            ["mode", "parallel", "quantizer", "epoch ms", "vs Vanilla", "comm ms (exposed)", "halo MB / epoch", "bytes vs Vanilla",
             "test acc", "solver ms (total)", "assign ms (total)"],
            [[r["mode"], r["parallel"], r["quantizer"], _fmt(r["epoch_time_s"], ".1f", 1e3), f"{r['epoch_time_vs_vanilla']:.2f}x",
              _fmt(r["comm_time_s"], ".1f", 1e3), _fmt(r["comm_bytes_per_epoch"], ".2f", 1e-6), f"{r['bytes_vs_vanilla']:.3f}",
              _fmt(r["test"], ".4f"), _fmt(r["solver_time_s"], ".1f", 1e3), _fmt(r["assign_time_s"], ".1f", 1e3)] for r in rows],
        ),
        "",
        "Epoch time: the slowest rank's training step (forward, backward, gradient all-reduce, optimizer step); "
        "comm time: time the training thread spent blocked in halo and gradient communication (overlap hides part of it). "
        "Bytes: halo bytes put on the wire per training epoch, all ranks, averaged over epochs (the first cycle runs at "
        "the first-cycle width). Solver/assign: rank 0's solver time and the whole reassignment (tracing excluded), summed over the run.",
        "",
        f"Last assignment's rows per width (AdaQP): {rows[-1]['bits_histogram']}",
        "",
    ]  # fmt: skip
    (args.out / "README.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
