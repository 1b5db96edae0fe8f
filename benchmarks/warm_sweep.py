"""A 10-point sweep with the warm launcher against the same points one by one (and against Hydra's basic launcher).

    python -m benchmarks.warm_sweep --data DIR --out results/warm_sweep [--epochs 60] [--rounds 1] [--work DIR]
    python -m benchmarks.warm_sweep --out results/warm_sweep --summarize WORK [--log LOG]

The sweep: ``gnnq -m dataset=cora experiment=adaqp_vanilla,adaqp trainer.seed=0,1,2,3,4 trainer.epochs=60``
(W&B offline, as by default). Each round times, one after another:

- ``one by one``: each point as its own ``gnnq <point's overrides>`` (a launcher each, its ranks started by it);
- ``warm``: the multirun with gnnq's default launcher (gnnq_warm: the ranks kept across points);
- ``basic``: the multirun with ``hydra/launcher=basic`` (each point's ranks started anew, in one launcher).

Rounds after the first run the three in another order (warm first, then basic first), so a machine that
slows down or speeds up over time does not favour one. ``DIR`` must hold Cora's raw files (Cora/raw/); its
partition cache is built before the first timing. Writes ``README.md``-ready numbers to ``OUT/results.json``
and ``OUT/results.md``: wall times, the ratios, and per point the test accuracy and halo bytes per epoch of
each way (equal, or the point is listed as differing).

Each way's wall time is also appended to ``WORK/walls.jsonl`` as it ends (``--work``: keep the runs there, else in
a temporary directory), so that ``--summarize WORK`` writes the results of the ways that ended when a run is
cut short; ``--log`` takes the wall times from this script's printed lines instead (``round R: WAY S s``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.gnnq_runs import command_line
from gnnq.bench.machine import describe_machine

EXPERIMENTS = ("adaqp_vanilla", "adaqp")
SEEDS = (0, 1, 2, 3, 4)
ORDERS = (("one_by_one", "warm", "basic"), ("warm", "basic", "one_by_one"), ("basic", "one_by_one", "warm"))


def _gnnq(args: list[str], data: Path, runs: Path) -> float:
    """Run ``gnnq ARGS``; its wall time in seconds (a failure stops the benchmark)."""
    env = {**os.environ, "GNNQ_DATA": str(data), "GNNQ_RUNS": str(runs), "WANDB_SILENT": "true"}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "gnnq.cli", *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise RuntimeError(f"gnnq {' '.join(args)} failed: {res.stderr.strip()[-2000:]}")
    return wall


def _records(root: Path) -> dict[tuple[str, int], dict]:
    out = {}
    for path in sorted(root.rglob("record.json")):
        record = json.loads(path.read_text())
        c = record["config"]
        name = "adaqp" if c["quantizer"]["name"] == "adaptive" else "adaqp_vanilla"
        out[(name, c["trainer"]["seed"])] = record
    return out


def run_way(way: str, base: list[str], data: Path, work: Path) -> tuple[float, dict]:
    runs = work / way
    if way == "one_by_one":
        wall = 0.0
        for exp in EXPERIMENTS:
            for seed in SEEDS:
                wall += _gnnq([*base, f"experiment={exp}", f"trainer.seed={seed}"], data, runs)
    else:
        sweep = [*base, f"experiment={','.join(EXPERIMENTS)}", f"trainer.seed={','.join(map(str, SEEDS))}"]
        launcher = ["hydra/launcher=basic"] if way == "basic" else []
        wall = _gnnq(["-m", *sweep, *launcher, f"hydra.sweep.dir={runs / 'sweep'}"], data, runs)
    return wall, _records(runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, help="a data root holding Cora/raw/")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--work", type=Path, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--summarize", type=Path, help="only write the results of the runs in this work directory")
    parser.add_argument("--log", type=Path, help="with --summarize: the wall times from this script's output")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.summarize:
        write_results(args, summarize(args.summarize, args.log))
        return
    if args.data is None:
        parser.error("--data is required")
    base = ["dataset=cora", f"trainer.epochs={args.epochs}"]
    with tempfile.TemporaryDirectory(prefix="gnnq-warm-sweep-") as tmp:
        work = args.work or Path(tmp)
        # the dataset processed and partitioned once, outside the timings (every way then reads the cache)
        _gnnq([*base, "trainer.epochs=1", "logger=none"], args.data, work / "prepare")
        for r in range(args.rounds):
            for way in ORDERS[r % len(ORDERS)]:
                wall, _ = run_way(way, base, args.data, work / f"round{r}")
                with open(work / "walls.jsonl", "a") as f:
                    f.write(json.dumps({"round": r, "way": way, "wall_s": wall}) + "\n")
                print(f"round {r}: {way} {wall:.1f} s", flush=True)
        write_results(args, summarize(work, None))


def summarize(work: Path, log: Path | None) -> list[dict]:
    """The rounds of a work directory: each way's wall time (walls.jsonl, or ``log``) and records."""
    if log is not None:
        found = re.findall(r"^round (\d+): (\w+) ([0-9.]+) s$", log.read_text(), re.MULTILINE)
        walls = [{"round": int(r), "way": w, "wall_s": float(t)} for r, w, t in found]
    else:
        walls = [json.loads(line) for line in (work / "walls.jsonl").read_text().splitlines()]
    rounds = []
    for r in sorted({w["round"] for w in walls}):
        ended = {w["way"]: w["wall_s"] for w in walls if w["round"] == r}
        records = {way: _records(work / f"round{r}" / way) for way in ended}
        rounds.append({"order": list(ended), "wall_s": ended, "records": records})
    return rounds


def write_results(args, rounds: list[dict]) -> None:
    """results.json and results.md from the ways every round ended (a way some round lacks is left out)."""
    ways = [w for w in ("one_by_one", "basic", "warm") if rounds and all(w in r["wall_s"] for r in rounds)]
    total = {w: sum(r["wall_s"][w] for r in rounds) for w in ways}
    ref = "one_by_one" if "one_by_one" in ways else ways[0]
    points = []
    for exp in EXPERIMENTS:
        for seed in SEEDS:
            per = {w: [r["records"][w].get((exp, seed), {}) for r in rounds] for w in ways}
            tests = {w: sorted({rec.get("test") for rec in per[w]}, key=str) for w in ways}
            sent = {w: sorted({rec.get("comm_bytes_per_epoch") for rec in per[w]}, key=str) for w in ways}
            statuses = {rec.get("status") for w in ways for rec in per[w]}
            points.append(
                {
                    "point": f"experiment={exp} trainer.seed={seed}",
                    "test": tests,
                    "comm_bytes_per_epoch": sent,
                    "identical": statuses == {"ok"}
                    and len(tests[ref]) == 1
                    and all(tests[w] == tests[ref] and sent[w] == sent[ref] for w in ways),
                }
            )
    result = {
        "command": command_line("benchmarks.warm_sweep", None),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": describe_machine(),
        "rounds": [{"order": r["order"], "wall_s": r["wall_s"]} for r in rounds],
        "wall_s": total,
        "ratios": {f"{a}/{b}": total[a] / total[b] for a in ways for b in ways if a != b},
        "points": points,
    }
    (args.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        f"| way | wall time (s, {len(rounds)} round(s)) | / {ref} |",
        "|---|---|---|",
        *(f"| {w} | {total[w]:.1f} | {total[w] / total[ref]:.2f} |" for w in ways),
        "",
        f"| point | test accuracy ({' / '.join(ways)}) | halo bytes per epoch | identical |",
        "|---|---|---|---|",
    ]
    for p in points:
        acc = " / ".join(",".join(f"{t:.4f}" if t is not None else "-" for t in p["test"][w]) for w in ways)
        sent = " / ".join(",".join(str(b) for b in p["comm_bytes_per_epoch"][w]) for w in ways)
        lines.append(f"| {p['point']} | {acc} | {sent} | {'yes' if p['identical'] else 'NO'} |")
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
