"""What tracing (``trainer.trace=true``) costs an epoch: the same 2-rank local run with tracing off and on.

    python -m benchmarks.trace_overhead --out results/projection/trace_overhead

Three measurements, each method the same 2-rank local run (Reddit-like graph, 1 thread per rank):

- Runs: every run a fresh ``gnnq`` (its real command line and ranks); per repeat each method runs off and on
  back to back, the order swapped every repeat. Ratio: the traced run's median epoch time (the slowest rank's)
  over the untraced one's, per repeat. On a shared machine the epochs of one run vary by tens of percent.
- Alternating epochs: one pair of gloo ranks sets up tracing as a traced run does (``start_trace``: meta.json,
  and each traced epoch's line written to rank<r>.jsonl), trains with the real epoch driver (``run_epoch``) and
  turns the recorder on and off between epochs (on, off, off, on, on, off, ...), so traced and untraced epochs
  interleave within seconds of each other. Ratio: per adjacent pair, traced over untraced; the median.
- The recorder alone, in this process: seconds per traced event (post, wait, codec, collective, and the
  epoch's line built from them) times the events a traced epoch holds, over the epoch time.

Writes results.json and README.md (the exact command, the machine, the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.gnnq_runs import command_line
from gnnq.bench.machine import describe_machine
from gnnq.comm.trace import DECODE, ENCODE, TraceRecorder
from gnnq.track.progress import markdown_table
from gnnq.track.trace_files import read_trace
from tests.helpers import run_distributed

METHODS = ("adaqp_vanilla", "adaqp")


def _overrides(method: str, args, epochs: int) -> list[str]:
    """The benchmark's workload: ``method`` on the reduced Reddit-like graph, 2 ranks, no logger."""
    return [
        f"experiment={method}",
        "dataset=reddit-like",
        f"dataset.num_nodes={args.num_nodes}",
        "cluster.nproc=2",
        "logger=none",
        f"trainer.epochs={epochs}",
    ]


def gnnq_run(method: str, trace: bool, args, runs: Path) -> dict:
    """One run; its record's epoch time, its rows' epoch times and, when traced, its events per epoch."""
    overrides = [
        *_overrides(method, args, args.epochs),
        f"trainer.eval_every={args.epochs}",
        f"trainer.trace={str(trace).lower()}",
    ]
    env = {**os.environ, "GNNQ_RUNS": str(runs)}
    if args.data:
        env["GNNQ_DATA"] = str(args.data)
    res = subprocess.run([sys.executable, "-m", "gnnq.cli", *overrides], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"gnnq {' '.join(overrides)} failed: {res.stderr.strip()[-2000:]}")
    run_dir = Path(next(line.split("run dir: ", 1)[1] for line in res.stdout.splitlines() if "run dir: " in line))
    record = json.loads((run_dir / "record.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    out = {
        "epoch_time_s": record["epoch_time_s"],
        "epoch_times_s": [r["epoch_time_s"] for r in rows],
        "command": "gnnq " + " ".join(overrides),
    }
    if trace:
        _, ranks = read_trace(run_dir)
        out["events_per_epoch"] = max(len(line["events"]) for lines in ranks.values() for line in lines)
    return out


def recorder_cost(events: int = 200_000) -> float:
    """Seconds per traced event of the recorder itself: posts with their encode, waits with their decode,
    collectives, and the epoch's line built from them (compute gaps included); the sink discards it."""
    recorder = TraceRecorder(0, 2, lambda line: None)
    key, per_epoch = ("halo_train", 1, "fwd"), 20
    started = time.perf_counter()
    for epoch in range(events // per_epoch):
        now = time.perf_counter()
        recorder.begin_epoch(epoch, now)
        for _ in range(per_epoch // 4):
            recorder.codec(key, ENCODE, now, now)
            msg = recorder.post(key, now, now, [0, 1024], [0, 1024])
            recorder.wait(key, msg, now, now)
            recorder.codec(key, DECODE, now, now)
            recorder.collective("grad_sync", now, now, 4096)
        recorder.end_epoch(1.0)
    return (time.perf_counter() - started) / events


def _alternating(overrides: list[str], epochs: int, run_dir: str) -> dict:
    """One rank of the alternating measurement: {"on": [...], "off": [...]} epoch times (slowest rank) per
    adjacent pair, after one warm-up epoch."""
    import torch

    from gnnq.comm import Communicator
    from gnnq.config.compose import compose_config
    from gnnq.data.part import build_parts
    from gnnq.data.partition import partition_nodes
    from gnnq.data.registry import load_dataset
    from gnnq.train.driver import run_epoch
    from gnnq.train.full_graph import FullGraphTrainer
    from gnnq.train.trace_setup import start_trace, stop_trace

    comm = Communicator()
    cfg = compose_config(overrides)
    graph = load_dataset(cfg.dataset)
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, comm.world_size, "metis", seed=0)
    part = build_parts(graph, assignment, comm.world_size)[comm.rank]
    del graph
    trainer = FullGraphTrainer(cfg, part, comm)
    lines = start_trace(cfg, part, comm, Path(run_dir))  # as a traced run: meta.json, rank<r>.jsonl written per epoch
    recorder = comm.stats.trace
    cpu, times = torch.device("cpu"), {"on": [], "off": []}
    run_epoch(trainer, 1, False, comm, cpu)  # warm-up, traced
    for epoch in range(2, epochs + 2):
        traced = (epoch // 2) % 2 == 1  # 2, 3: on, off; 4, 5: off, on; ...
        comm.stats.trace = recorder if traced else None
        times["on" if traced else "off"].append(run_epoch(trainer, epoch, False, comm, cpu)["epoch_time_s"])
    stop_trace(comm, lines)
    trainer.strategy.close()
    return times


def alternating(method: str, args) -> dict:
    overrides = _overrides(method, args, args.alternate_epochs + 1)
    with tempfile.TemporaryDirectory() as run_dir:
        times = run_distributed(2, _alternating, overrides, args.alternate_epochs, run_dir)[0]
    ratios = [a / b for a, b in zip(times["on"], times["off"])]
    return {"method": method, **times, "ratios": ratios, "median_ratio": statistics.median(ratios)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("results/projection/trace_overhead"))
    p.add_argument("--data", type=Path, help="data root (default: $GNNQ_DATA or gnnq's default)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--num-nodes", type=int, default=20_000, help="dataset.num_nodes of the Reddit-like graph")
    p.add_argument("--methods", nargs="+", default=list(METHODS), help="experiment= presets")
    p.add_argument("--alternate-epochs", type=int, default=24, help="epochs of the alternating measurement (even)")
    args = p.parse_args(argv)
    command = command_line("benchmarks.trace_overhead", argv)
    started, load = time.time(), [os.getloadavg()[0]]
    samples = {(m, t): [] for m in args.methods for t in (False, True)}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.repeats):
            for method in args.methods:
                for trace in (False, True) if rep % 2 == 0 else (True, False):
                    print(
                        f"[bench] repeat {rep + 1}/{args.repeats} {method} trace={trace} ({time.time() - started:.0f}s)"
                    )
                    samples[(method, trace)].append(gnnq_run(method, trace, args, Path(tmp)))
                    load.append(os.getloadavg()[0])
    alternated = []
    for method in args.methods:
        print(f"[bench] alternating epochs: {method} ({time.time() - started:.0f}s)", flush=True)
        alternated.append(alternating(method, args))
        load.append(os.getloadavg()[0])
    per_event = recorder_cost()
    rows, results = [], []
    for method in args.methods:
        off, on = samples[(method, False)], samples[(method, True)]
        ratios = [b["epoch_time_s"] / a["epoch_time_s"] for a, b in zip(off, on)]
        events = max(s["events_per_epoch"] for s in on)
        epoch = statistics.median(s["epoch_time_s"] for s in off)
        bound = events * per_event / epoch
        results.append(
            {
                "method": method,
                "off_s": [s["epoch_time_s"] for s in off],
                "on_s": [s["epoch_time_s"] for s in on],
                "ratios": ratios,
                "median_ratio": statistics.median(ratios),
                "events_per_epoch": events,
                "recorder_share": bound,
                "commands": [off[0]["command"], on[0]["command"]],
                "epoch_times_off_s": [s["epoch_times_s"] for s in off],
                "epoch_times_on_s": [s["epoch_times_s"] for s in on],
            }
        )
        rows.append(
            [
                method,
                f"{statistics.median(r['epoch_time_s'] for r in off) * 1e3:.0f}",
                f"{statistics.median(r['epoch_time_s'] for r in on) * 1e3:.0f}",
                f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]",
                str(events),
                f"{bound * 100:.4f}%",
            ]
        )
    machine = describe_machine()
    out = {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine,
        "load_average_1min": {"min": min(load), "max": max(load), "median": statistics.median(load)},
        "recorder_seconds_per_event": per_event,
        "results": results,
        "alternating": alternated,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(out, indent=2) + "\n")
    table = markdown_table(
        ["method", "epoch ms off", "epoch ms on", "on/off [min-max]", "events/epoch", "recorder share"], rows
    )
    (args.out / "README.md").write_text(
        "# Trace overhead (trainer.trace=true)\n\n"
        f"Command: `{command}`\n\nDate: {out['date']}. Machine: {machine.get('cpu')}, {machine.get('cores')} "
        f"cores, torch {machine['torch']}; shared with other jobs (1-min load average {min(load):.1f}-{max(load):.1f}, "
        f"median {statistics.median(load):.1f}).\n\n"
        f"{args.repeats} repeats, each method off and on back to back (order swapped every repeat); 2 local ranks, "
        f"Reddit-like graph with {args.num_nodes} nodes, {args.epochs} epochs (evaluation only after the last).\n\n"
        "## Runs\n\n"
        f"{table}\n\nEpoch ms: the run's median epoch time (slowest rank), median over repeats. on/off: per repeat, "
        "the traced run's over the untraced one's, median [min-max]. Recorder share: the recorder's own cost per "
        f"event ({per_event * 1e6:.2f} µs, measured in one process: post, wait, codec, collective calls and the "
        "epoch's line) times the events of a traced epoch, over the untraced epoch time.\n\n"
        "## Alternating epochs\n\n"
        f"One pair of gloo ranks, {args.alternate_epochs} epochs after a warm-up, the recorder on and off in turn "
        "(on, off, off, on, ...), the trace files written as in a traced run; epoch time: the slowest rank's.\n\n"
        + markdown_table(
            ["method", "epoch ms off (median)", "epoch ms on (median)", "on/off per pair: median [min-max]", "pairs"],
            [
                [
                    a["method"],
                    f"{statistics.median(a['off']) * 1e3:.0f}",
                    f"{statistics.median(a['on']) * 1e3:.0f}",
                    f"{a['median_ratio']:.3f} [{min(a['ratios']):.3f}-{max(a['ratios']):.3f}]",
                    str(len(a["ratios"])),
                ]
                for a in alternated
            ],
        )
        + "\n"
    )
    print((args.out / "README.md").read_text())


if __name__ == "__main__":
    main()
