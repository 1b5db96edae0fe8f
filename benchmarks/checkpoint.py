"""Checkpoint cost and resume time on the 200k-node synthetic graph with 4 ranks.

    python -m benchmarks.checkpoint --data DIR --out results/checkpoint [--epochs 6] [--nproc 4]

Three runs of the real command line, side by side on the same data (its parts are built once):

1. ``straight``: every epoch checkpointed (``trainer.checkpoint_every=1``), run to the end;
   its summary gives each checkpoint's write time (slowest rank) and size, next to the epoch time.
2. ``interrupted``: the same run, with rank 1 failing at the start of the last epoch
   (GNNQ_FAULT_INJECT), so the latest checkpoint is the one before it;
3. ``gnnq resume=<its run dir>``: the time to load every rank's checkpoint, the resumed
   command's wall time against the straight run's, and whether its metrics equal the straight run's.

Writes results.json and README.md (tables, the exact commands, machine) under ``--out``.
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
from gnnq.track.progress import markdown_table

TIME_KEYS = ("epoch_time_s", "comm_time_s", "compute_time_s")


def _gnnq(
    args: list[str], data: Path, runs: Path, env: dict | None = None
) -> tuple[subprocess.CompletedProcess, float]:
    full_env = {**os.environ, "GNNQ_DATA": str(data), "GNNQ_RUNS": str(runs), **(env or {})}
    started = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "gnnq.cli", *args], capture_output=True, text=True, env=full_env)
    return res, time.perf_counter() - started


def _run_dir(res: subprocess.CompletedProcess) -> Path:
    return Path(next(line.split("run dir: ", 1)[1] for line in res.stdout.splitlines() if "run dir: " in line))


def _rows(run_dir: Path) -> list[dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIME_KEYS and k != "assignment"} for r in rows]


def measure(data: Path, runs: Path, epochs: int, nproc: int) -> dict:
    args = [
        "experiment=synthetic_large",
        f"cluster.nproc={nproc}",
        "logger=none",
        f"trainer.epochs={epochs}",
        "trainer.checkpoint_every=1",
    ]
    res, _ = _gnnq(args + ["trainer.epochs=1"], data, runs / "warmup")  # builds the dataset and its parts once
    if res.returncode != 0:
        raise RuntimeError(f"warm-up run failed: {res.stderr[-2000:]}")
    res, straight_wall = _gnnq(args, data, runs / "straight")
    if res.returncode != 0:
        raise RuntimeError(f"straight run failed: {res.stderr[-2000:]}")
    straight = _run_dir(res)
    res, interrupted_wall = _gnnq(args, data, runs / "resumed", env={"GNNQ_FAULT_INJECT": f"rank=1,epoch={epochs}"})
    if res.returncode != 1:
        raise RuntimeError(f"the interrupted run should fail at epoch {epochs}: {res.stderr[-2000:]}")
    resumed = _run_dir(res)
    res, resume_wall = _gnnq([f"resume={resumed}"], data, runs / "resumed")
    if res.returncode != 0:
        raise RuntimeError(f"resume failed: {res.stderr[-2000:]}")
    straight_rec = json.loads((straight / "record.json").read_text())
    resumed_rec = json.loads((resumed / "record.json").read_text())
    ckpt = straight_rec["summary"]["checkpoints"]
    latest = json.loads((straight / "checkpoints" / "latest.json").read_text())
    return {
        "commands": {
            "straight": "gnnq " + " ".join(args),
            "interrupted": f"GNNQ_FAULT_INJECT=rank=1,epoch={epochs} gnnq " + " ".join(args),
            "resume": "gnnq resume=<the interrupted run's dir>",
        },
        "graph": {"nodes": straight_rec["partition"]["num_nodes"], "edges": straight_rec["partition"]["num_edges"]},
        "ranks": nproc,
        "epochs": epochs,
        "epoch_time_s_median": straight_rec["epoch_time_s"],
        "checkpoint_log": ckpt["log"],
        "checkpoint_write_s_median": statistics.median(e["checkpoint_write_s"] for e in ckpt["log"]),
        "checkpoint_bytes_per_rank": latest["bytes"],
        "resume_load_s": resumed_rec["summary"]["checkpoints"]["resume_load_s"],
        "resumed_from_epoch": resumed_rec["resumed_from_epoch"],
        "wall_s": {"straight": straight_wall, "interrupted": interrupted_wall, "resume": resume_wall},
        "resumed_metrics_equal_straight": _rows(resumed) == _rows(straight),
        "test": {"straight": straight_rec["test"], "resumed": resumed_rec["test"]},
    }


def write_report(result: dict, out: Path, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1))
    epoch = result["epoch_time_s_median"]
    mib = [b / 2**20 for b in result["checkpoint_bytes_per_rank"]]
    per_epoch = [
        [e["epoch"], f"{e['checkpoint_write_s'] * 1e3:.0f}", f"{e['checkpoint_bytes'] / 2**20:.1f}"]
        for e in result["checkpoint_log"]
    ]
    wall = result["wall_s"]
    lines = [
        "# Checkpoint and resume cost",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {json.dumps(result['machine'])}",
        "",
        f"Graph: {result['graph']['nodes']:,} nodes, {result['graph']['edges']:,} edges "
        "(`experiment=synthetic_large`), "
        f"{result['ranks']} ranks on this machine, {result['epochs']} epochs, a checkpoint after every epoch.",
        "",
        "## Writing",
        "",
        markdown_table(
            ["", "value"],
            [
                [
                    "checkpoint write, median over epochs (slowest rank)",
                    f"{result['checkpoint_write_s_median'] * 1e3:.0f} ms",
                ],
                ["epoch time, median", f"{epoch * 1e3:.0f} ms"],
                ["write / epoch time", f"{100 * result['checkpoint_write_s_median'] / epoch:.2f}%"],
                ["size per rank (last checkpoint)", ", ".join(f"{m:.1f}" for m in mib) + " MiB"],
            ],
        ),
        "",
        markdown_table(["epoch", "write (ms, slowest rank)", "all ranks (MiB)"], per_epoch),
        "",
        "## Resuming",
        "",
        markdown_table(
            ["", "value"],
            [
                [
                    f"load every rank's checkpoint (epoch {result['resumed_from_epoch']}), slowest rank",
                    f"{result['resume_load_s'] * 1e3:.0f} ms",
                ],
                ["`gnnq resume=...` wall time (1 epoch left)", f"{wall['resume']:.1f} s"],
                [f"straight run wall time ({result['epochs']} epochs)", f"{wall['straight']:.1f} s"],
                [
                    "resumed metrics equal the straight run's (all epochs, times aside)",
                    result["resumed_metrics_equal_straight"],
                ],
            ],
        ),
        "",
        "Commands (each run in a fresh process, one after the other, on the same cached parts):",
        "",
        *[f"- {k}: `{v}`" for k, v in result["commands"].items()],
        "",
    ]
    (out / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--data", type=Path, required=True, help="data root (the synthetic graph and its parts are cached there)"
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--nproc", type=int, default=4)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gnnq-bench-checkpoint-") as runs:
        result = measure(args.data, Path(runs), args.epochs, args.nproc)
    result["machine"] = describe_machine()
    write_report(result, args.out, command_line("benchmarks.checkpoint", argv))
    return 0 if result["resumed_metrics_equal_straight"] else 1


if __name__ == "__main__":
    sys.exit(main())
