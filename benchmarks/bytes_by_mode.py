"""Bytes per epoch by kind (halo, gradient all-reduce, evaluation), test accuracy and epoch time of a sweep's runs,
grouped by their gradient-sync mode (trainer.grad_sync.mode), as a Markdown table (results/wide_graphs/modes).

    python -m benchmarks.bytes_by_mode SWEEP_DIR [--baseline-total-mb 86.63] [--jsonl OUT.jsonl]

Each row: the mean over the mode's runs (seeds); total = halo + gradient + evaluation bytes per training epoch, all
ranks (the bytes sent once per run, setup and AdaQP's profile, are left out, as in results/wide_graphs/README.md);
``vs baseline``: total over ``--baseline-total-mb``. ``--jsonl`` writes the per-run numbers the table is made of.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from gnnq.report.fields import summary, traffic

MB = 1e6


def run_row(record: dict) -> dict:
    """The numbers of one run's record that the table shows."""
    s, t = summary(record), traffic(record)
    return {
        "run_dir": record["run_dir"],
        "mode": s["grad_sync"]["mode"],
        "seed": record["config"]["trainer"]["seed"],
        "halo_mb": record["comm_bytes_per_epoch"] / MB,
        "grad_mb": t["grad_sync_bytes_per_epoch"] / MB,
        "eval_mb": t["eval_bytes_per_epoch"] / MB,
        "test": record["test"],
        "best_val": record["best_val"],
        "best_epoch": s.get("best_epoch"),
        "epoch_ms": record["epoch_time_s"] * 1000,
        "peak_mib_per_rank": s.get("peak_memory_mib_per_rank"),
        "estimate_mib_per_rank": record["partition"].get("memory_estimate_mib_per_rank"),
    }


def table(rows: list[dict], baseline_total_mb: float | None) -> str:
    """The Markdown table: a line per mode, in the order the modes first appear in ``rows``."""
    head = "| mode | runs | halo MB | gradient MB | evaluation MB | total MB | vs Vanilla | test (mean ± std) |"
    lines = [head + " epoch ms median [min-max] (noisy) |", "|" + "---|" * 9]
    for mode in dict.fromkeys(r["mode"] for r in rows):
        runs = [r for r in rows if r["mode"] == mode]
        halo, grad, ev = (statistics.mean(r[k] for r in runs) for k in ("halo_mb", "grad_mb", "eval_mb"))
        total = halo + grad + ev
        ratio = f"{total / baseline_total_mb:.3f}" if baseline_total_mb else "-"
        tests, epochs = [r["test"] for r in runs], [r["epoch_ms"] for r in runs]
        std = statistics.stdev(tests) if len(tests) > 1 else 0.0
        lines.append(
            f"| {mode} | {len(runs)} | {halo:.2f} | {grad:.3f} | {ev:.2f} | {total:.2f} | {ratio} | "
            f"{statistics.mean(tests):.4f} ± {std:.4f} | "
            f"{statistics.median(epochs):.0f} [{min(epochs):.0f}-{max(epochs):.0f}] |"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sweep", type=Path)
    ap.add_argument("--baseline-total-mb", type=float, default=None)
    ap.add_argument("--jsonl", type=Path, default=None)
    args = ap.parse_args(argv)
    # a sweep's job directories in its order: 0_..., 1_..., ..., 10_...
    files = sorted(args.sweep.glob("*/record.json"), key=lambda p: (len(p.parent.name.split("_")[0]), p.parent.name))
    records = [json.loads(p.read_text()) for p in files]
    rows = [run_row(r) for r in records if r.get("status") == "ok"]
    if args.jsonl:
        args.jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(table(rows, args.baseline_total_mb))
    failed = len(records) - len(rows)
    if failed:
        print(f"\n{failed} run(s) not ok, left out")


if __name__ == "__main__":
    main()
