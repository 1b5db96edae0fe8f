"""Start-up cost of a short run: ``gnnq dataset=cora cluster.nproc=2 trainer.epochs=1 logger=none`` against one
``python -c "import torch, torch_geometric"``, for this checkout and (``--before DIR``) another one, e.g. main.

    git worktree add /tmp/startup-before main
    python -m benchmarks.startup --data DIR --before /tmp/startup-before --out results/startup

Each code base runs through its real command line (``python -m gnnq.cli``, PYTHONPATH set to it) once untimed,
which builds the partition cache (and, where the code keeps one, the dataset summary); then the import and the
runs take turns, ``--repeats`` times, so the ratios compare commands made side by side under the same load.
Writes results.json and README.md (medians, the exact command, the machine) under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gnnq.bench.machine import describe_machine
from gnnq.track.progress import markdown_table

RUN = ["dataset=cora", "cluster.nproc=2", "trainer.epochs=1", "logger=none"]
IMPORT = [sys.executable, "-c", "import torch, torch_geometric"]
HERE = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """(wall s, CPU s of the command and its children) of one run of ``cmd`` in ``cwd``; it must succeed.

    ``cwd`` holds no gnnq: ``python -m`` puts the working directory first on sys.path, before PYTHONPATH."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"{shlex.join(cmd)} failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def machine_line(m: dict) -> str:
    return f"{m.get('cpu')}, {m.get('cores')} cores, {m.get('memory_gib')} GiB, torch {m.get('torch', '?')}"


def gnnq_command(runs: Path) -> list[str]:
    return [sys.executable, "-m", "gnnq.cli", *RUN, f"runs_root={runs}"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="a data root holding Cora (GNNQ_DATA)")
    parser.add_argument("--before", type=Path, help="another gnnq checkout to measure beside this one (e.g. main)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("results/startup"))
    args = parser.parse_args(argv)
    codes = {"after": HERE, **({"before": args.before.resolve()} if args.before else {})}
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GNNQ_RUNS")}
    base["GNNQ_DATA"] = str(args.data.resolve())
    envs = {name: {**base, "PYTHONPATH": str(path)} for name, path in codes.items()}
    samples: dict[str, list[tuple[float, float]]] = {"import": [], **{name: [] for name in codes}}
    with tempfile.TemporaryDirectory(prefix="gnnq-startup-") as tmp:
        runs = Path(tmp)
        for name in codes:  # untimed: the partition cache (and dataset summary) exist from here on
            timed(gnnq_command(runs / name), envs[name], runs)
        for i in range(args.repeats):
            samples["import"].append(timed(IMPORT, base, runs))
            for name in codes:
                samples[name].append(timed(gnnq_command(runs / name), envs[name], runs))
            print(f"repeat {i + 1}/{args.repeats}: " + ", ".join(f"{k} {v[-1][0]:.1f}s" for k, v in samples.items()))
    results = {}
    for name, got in samples.items():
        results[name] = {
            "code": str(codes.get(name, "")),
            "wall_s": [round(w, 3) for w, _ in got],
            "cpu_s": [round(c, 3) for _, c in got],
            "median_wall_s": round(statistics.median(w for w, _ in got), 3),
            "median_cpu_s": round(statistics.median(c for _, c in got), 3),
            "median_ratio_to_import": round(
                statistics.median(w / iw for (w, _), (iw, _) in zip(got, samples["import"])), 2
            ),
        }
    command = "python -m benchmarks.startup " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    out = {
        "command": command,
        "run": "gnnq " + " ".join(RUN),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": describe_machine(),
        "repeats": args.repeats,
        "results": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(out, indent=1))
    print(write_readme(args.out, out))


def write_readme(folder: Path, out: dict) -> str:
    """README.md of ``out`` (results.json's content) in ``folder``; returns its table."""
    res = out["results"]
    imp_wall, imp_cpu = res["import"]["median_wall_s"], res["import"]["median_cpu_s"]
    rows = [
        [
            name if name == "import" else f"gnnq ({name}: {r['code']})",
            f"{r['median_wall_s']:.2f}",
            f"{r['median_cpu_s']:.2f}",
            f"{r['median_ratio_to_import']:.2f}x",
            f"{r['median_wall_s'] / imp_wall:.2f}x",
            f"{r['median_cpu_s'] / imp_cpu:.2f}x",
        ]
        for name, r in res.items()
    ]
    headers = ["command", "median wall s", "median CPU s", "wall / import (paired)", "wall / import", "CPU / import"]
    table = markdown_table(headers, rows)
    (folder / "README.md").write_text(
        "# Start-up: a 1-epoch, 2-rank Cora run against one import of torch and PyG\n\n"
        f"Command: `{out['command']}` ({out['date']}; {out['repeats']} repeats, interleaved: the import, then each "
        "code base's run, in turn; medians).\n\n"
        f"The run: `{out['run']}`, with its partition cache built by an untimed run first. The import: "
        f"`{shlex.join(IMPORT[1:])}`. CPU s: user + system time of the command and all its processes. "
        "Wall / import (paired): the median of each run's wall time over the import's just before it.\n\n"
        f"Machine: {machine_line(out['machine'])}, shared with other jobs while this ran (a load average far above "
        "its 2 cores). Under such load a command of several processes gets more of the CPU than a single one "
        "(the scheduler shares it by process), which flatters the runs' wall time against the import's; the CPU "
        "ratio does not depend on it.\n\n" + table + "\n"
    )
    return table


if __name__ == "__main__":
    main()
