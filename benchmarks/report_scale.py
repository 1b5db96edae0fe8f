"""gnnq-report over many runs (issue 45.6): one real run copied N times (the seed, the model width and the
quantizer varied so that the copies fall into several configurations, as a sweep's runs do), then the real
``gnnq-report`` command timed on them, with its peak memory (the child's max RSS) and the progress lines it printed.

    python -m benchmarks.report_scale --runs 10000 --out results/report_scale [--plots]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.gnnq_runs import command_line, run_gnnq
from gnnq.bench.machine import describe_machine

WIDTHS = (16, 32, 64, 128)
QUANTIZERS = ({"name": "fp32"}, {"name": "uniform", "bits": 8}, {"name": "uniform", "bits": 4})


def make_runs(root: Path, n: int) -> Path:
    """``n`` run directories under ``root/runs``: copies of one real run, each with its own record and metrics."""
    real = run_gnnq(
        ["logger=none", "dataset.num_nodes=600", "model.hidden=16", "trainer.epochs=3"], root / "data", root / "real"
    )[0]
    src = Path(real["run_dir"])
    record, metrics = json.loads((src / "record.json").read_text()), (src / "metrics.jsonl").read_text()
    runs = root / "runs"
    for i in range(n):
        d = runs / f"sweep-{i // 1000}" / f"{i % 1000}_trainer.seed={i}"
        d.mkdir(parents=True)
        rec = json.loads(json.dumps(record))
        rec["config"]["trainer"]["seed"] = i % 5
        rec["config"]["model"]["hidden"] = WIDTHS[(i // 5) % len(WIDTHS)]
        rec["config"]["quantizer"] = {**rec["config"]["quantizer"], **QUANTIZERS[(i // 20) % len(QUANTIZERS)]}
        rec["run_dir"] = str(d)
        (d / "record.json").write_text(json.dumps(rec))
        (d / "metrics.jsonl").write_text(metrics)
    return runs


def time_report(runs: Path, out: Path, plots: bool) -> dict:
    """gnnq-report on ``runs``: wall seconds, CPU seconds and peak memory of that process alone (GNU time), the
    seconds until its first file appeared in ``out``, its progress lines."""
    cmd = [str(Path(sys.executable).parent / "gnnq-report"), str(runs), "--out", str(out)] + (["--plots"] * plots)
    timing = out.with_name(out.name + ".time")
    wrapper = ["/usr/bin/time", "-o", str(timing), "-f", "%M %U %S"] if Path("/usr/bin/time").is_file() else []
    t0 = time.perf_counter()
    proc = subprocess.Popen([*wrapper, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    first = None
    while proc.poll() is None:
        if first is None and out.is_dir() and any(out.iterdir()):
            first = time.perf_counter() - t0
        time.sleep(0.05)
    seconds = time.perf_counter() - t0
    stderr = proc.stderr.read()
    if proc.returncode != 0:
        raise RuntimeError(f"gnnq-report failed: {stderr[-2000:]}")
    rss_kib, user, system = (float(v) for v in timing.read_text().split()[-3:]) if wrapper else (0.0, 0.0, 0.0)
    return {
        "plots": plots,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(user + system, 1),
        "seconds_to_first_file": None if first is None else round(first, 1),
        "peak_rss_mib": round(rss_kib / 1024, 1),
        "progress_lines": [line for line in stderr.splitlines() if line.startswith("gnnq-report: ")],
        "files": sorted(p.name for p in out.iterdir()),
    }


SHARED = ": the machine was shared with other jobs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report_scale", description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=Path("results/report_scale"))
    parser.add_argument("--plots", action="store_true", help="also time a second report with --plots")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="gnnq-report-scale-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        runs = make_runs(root, args.runs)
        made = time.perf_counter() - t0
        results = [time_report(runs, root / "report", plots=False)]
        if args.plots:
            shutil.rmtree(root / "report")
            results.append(time_report(runs, root / "report", plots=True))  # its peak: max over both
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    summary = {
        "command": command_line("benchmarks.report_scale", argv),
        "runs": args.runs,
        "seconds_to_make_runs": round(made, 1),
        "load_average_after": load,
        "machine": describe_machine(),
        "reports": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = [
        "# gnnq-report over many runs",
        "",
        "```bash",
        summary["command"],
        "```",
        "",
        f"{args.runs:,} runs (copies of one real 3-epoch run, in {len(WIDTHS) * len(QUANTIZERS)} configurations x 5 "
        "seeds), each with its record.json and metrics.jsonl, reported by the real `gnnq-report` command "
        f"(load average {' '.join(load)} at the end{SHARED if float(load[0]) > 1.5 else ''}).",
        "",
        "| report | seconds (wall) | CPU seconds | first file (s) | peak memory (MiB, max RSS) | progress lines |",
        "|---|---|---|---|---|---|",
        *(
            f"| {'with --plots' if r['plots'] else 'without plots'} | {r['seconds']} | {r['cpu_seconds']} | "
            f"{r['seconds_to_first_file']} | {r['peak_rss_mib']} | {len(r['progress_lines'])} |"
            for r in results
        ),
        "",
        *(
            ["Progress lines (stderr) of the report without plots:", "", "```", *results[0]["progress_lines"], "```"]
            if results[0]["progress_lines"]
            else ["No progress lines: each report finished before the first one is due (one every 2 s)."]
        ),
        "",
    ]
    (args.out / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
