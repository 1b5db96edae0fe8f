"""gnnq-bench: the points of a sweep side by side, interleaved and repeated, against a baseline.

    gnnq-bench project RUN_DIR... [options]   (projections of traced runs: docs/projection.md)
    gnnq-bench SWEEP [--repeats 3] [--baseline experiment=adaqp_vanilla] [--pair METHOD=BASELINE ...]
               [--out DIR] [--plot-x KEY] [--target VALUE | --target-drop 0.01] [--data DIR] [OVERRIDES...]

SWEEP is a sweep file in sweeps/ (by name) or a path to one; OVERRIDES change it as on the
``gnnq -m`` command line (``cluster.link=1gbit,10gbit`` adds or narrows an axis). Each repeat runs
every point once, as a single ``gnnq`` run, in an order rotated by one per repeat, so slow and fast
phases of a shared machine fall on every point alike. Unless ``trainer.seed`` is set, repeat r
uses ``trainer.seed=r``. The point whose ``--baseline`` axis has the baseline value is the
reference of every point that agrees with it on the other axes (its "setting"); ``--pair
METHOD=BASELINE`` (repeatable; both values of the baseline's axis) gives the points of METHOD their
own reference, e.g. ``--pair adaqp_published=adaqp_vanilla_published``.

Every run keeps its directory under OUT/runs/rep<r>/point<i> (a record and metrics.jsonl, as any
gnnq run, so ``gnnq-report OUT/runs`` reads them too). Running the same command again skips the
runs that finished and reruns failed ones (their directories are kept as *.failed-<n>).
Writes OUT/results.json, OUT/results.csv and OUT/README.md (the exact command, the machine, the
table), and with ``--plot-x`` the speedup against that axis (PNG and SVG).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gnnq.bench.bench_report import write_outputs
from gnnq.bench.compare import Point, compare
from gnnq.config.compose import resolve_sweep, sweep_points
from gnnq.contract import RECORD_FILE
from gnnq.errors import ConfigError, GnnqError


def build_points(
    raw: list[list[str]], baseline: str, pairs: tuple[str, ...] | list[str] = ()
) -> tuple[list[Point], dict[str, str]]:
    """Points with their method (value on the baseline's axis) and setting (values on the other axes), and the
    ``--pair`` references (method -> its own baseline method), checked against the axis's values."""
    key, _, value = baseline.partition("=")
    if not value:
        raise ConfigError(f"--baseline {baseline!r}: give it as KEY=VALUE, e.g. experiment=adaqp_vanilla")
    keys = [o.split("=", 1)[0] for o in raw[0]]
    axes = [i for i in range(len(keys)) if len({p[i] for p in raw}) > 1]
    axis_keys = [keys[i].lstrip("+~") for i in axes]
    if key not in axis_keys:
        raise ConfigError(
            f"--baseline {baseline}: {key!r} is not an axis of this sweep (axes: {', '.join(axis_keys) or 'none'})"
        )
    method_pos = axes[axis_keys.index(key)]
    values = list(dict.fromkeys(p[method_pos].split("=", 1)[1] for p in raw))
    if value not in values:
        raise ConfigError(f"--baseline {baseline}: {key} takes {', '.join(values)} in this sweep")
    references = {}
    for pair in pairs:
        method, _, reference = pair.partition("=")
        if not reference:
            raise ConfigError(
                f"--pair {pair!r}: give it as METHOD=BASELINE, two values of {key}, e.g. "
                "adaqp_published=adaqp_vanilla_published"
            )
        for name in (method, reference):
            if name not in values:
                raise ConfigError(f"--pair {pair}: {name!r} is not a value of {key} here ({', '.join(values)})")
        if method == reference:
            raise ConfigError(f"--pair {pair}: a method against itself; name another value of {key} as its baseline")
        if references.get(method, reference) != reference:
            raise ConfigError(f"--pair {pair}: {method} is already paired with {references[method]}; give it one pair")
        references[method] = reference
    points = []
    for i, p in enumerate(raw):
        setting = tuple((keys[a].lstrip("+~"), p[a].split("=", 1)[1]) for a in axes if a != method_pos)
        points.append(Point(i, p, p[method_pos].split("=", 1)[1], setting))
    return points, references


def run_order(n_points: int, repeats: int) -> list[tuple[int, int]]:
    """(repeat, point) in the order they run: every repeat covers every point, rotated by one each repeat."""
    return [(r, (r + k) % n_points) for r in range(repeats) for k in range(n_points)]


def _read_record(run_root: Path) -> dict | None:
    found = sorted(run_root.rglob(RECORD_FILE))
    if not found:
        return None
    rec = json.loads(found[-1].read_text())
    return {**rec, "run_dir": str(found[-1].parent)}


def _set_aside(run_root: Path) -> None:
    n = 1
    while run_root.with_name(f"{run_root.name}.failed-{n}").exists():
        n += 1
    run_root.rename(run_root.with_name(f"{run_root.name}.failed-{n}"))


def run_point(sweep: tuple[str, str], overrides: list[str], run_root: Path, data: Path | None) -> dict:
    """One ``gnnq`` run of a point; its record (a failed one if gnnq left none)."""
    env = {**os.environ, "GNNQ_RUNS": str(run_root)}
    if data is not None:
        env["GNNQ_DATA"] = str(data)
    run_root.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "gnnq.cli", "--config-dir", sweep[0], "--config-name", sweep[1], *overrides]
    with open(run_root / "gnnq.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        res = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    rec = _read_record(run_root)
    if rec is None:
        tail = (run_root / "gnnq.log").read_text().strip().splitlines()[-1:] or [""]
        rec = {
            "status": "failed",
            "error": f"gnnq exited with {res.returncode} and wrote no record: {tail[0]}",
            "run_dir": str(run_root),
        }
    return rec


def _seeded(overrides: list[str], repeat: int, same_seed: bool) -> list[str]:
    if same_seed or any(o.lstrip("+~").startswith("trainer.seed=") for o in overrides):
        return overrides
    return [*overrides, f"trainer.seed={repeat}"]


def _fmt_eta(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"


def run_all(points: list[Point], sweep: tuple[str, str], args, extra: list[str]) -> None:
    """Run every (repeat, point) not yet finished, showing progress; fills ``point.runs``."""
    order = run_order(len(points), args.repeats)
    todo, durations = [], []
    for r, i in order:
        root = args.out / "runs" / f"rep{r}" / f"point{i:02d}"
        rec = _read_record(root) if root.exists() else None
        if rec is not None and rec.get("status") == "ok":
            points[i].runs[r] = rec
            continue
        if root.exists():
            _set_aside(root)
        todo.append((r, i, root))
    if len(todo) < len(order):
        print(
            f"[gnnq-bench] {len(order) - len(todo)} of {len(order)} runs already done in {args.out / 'runs'}",
            flush=True,
        )
    for n, (r, i, root) in enumerate(todo, 1):
        p = points[i]
        overrides = _seeded([*p.overrides, *extra], r, args.same_seed)
        eta = f", about {_fmt_eta(statistics.fmean(durations) * (len(todo) - n + 1))} left" if durations else ""
        print(
            f"[gnnq-bench] run {n}/{len(todo)} (repeat {r + 1}/{args.repeats}{eta}): {' '.join(p.overrides)}",
            flush=True,
        )
        t0 = time.monotonic()
        rec = run_point(sweep, overrides, root, args.data)
        durations.append(time.monotonic() - t0)
        p.runs[r] = rec
        if rec.get("status") == "ok":
            print(
                f"[gnnq-bench]   epoch {rec['epoch_time_s'] * 1e3:.1f} ms, test {rec['test']:.4f} "
                f"({durations[-1]:.0f} s)",
                flush=True,
            )
        else:
            print(f"[gnnq-bench]   FAILED: {rec.get('error')} (log: {root / 'gnnq.log'})", flush=True)


def parse_args(argv: list[str] | None):
    p = argparse.ArgumentParser(
        prog="gnnq-bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("sweep", help="a sweep file in sweeps/ (name) or a path to one")
    p.add_argument("overrides", nargs="*", help="gnnq overrides for every point (sweeps like a=1,2 add or narrow axes)")
    p.add_argument("--repeats", type=int, default=3, help="runs of every point (default 3)")
    p.add_argument(
        "--baseline",
        default="experiment=adaqp_vanilla",
        help="AXIS=VALUE of the reference method (default %(default)s)",
    )
    p.add_argument(
        "--pair",
        action="append",
        default=[],
        metavar="METHOD=BASELINE",
        help="compare METHOD's points against BASELINE's instead of --baseline's (repeatable; values of its axis)",
    )
    p.add_argument("--out", type=Path, help="results directory (default results/bench/<sweep>)")
    p.add_argument("--data", type=Path, help="data root (default: $GNNQ_DATA or gnnq's default)")
    p.add_argument(
        "--target",
        type=float,
        help="validation target for time-to-target (default: baseline's median best minus --target-drop)",
    )
    p.add_argument("--target-drop", type=float, default=0.01, help="default %(default)s")
    p.add_argument("--plot-x", help="an axis to plot the speedup against (e.g. cluster.link)")
    p.add_argument("--same-seed", action="store_true", help="keep the sweep's trainer.seed in every repeat")
    args = p.parse_intermixed_args(argv)  # overrides may come before and after the options
    if args.repeats < 1:
        p.error(f"--repeats must be at least 1 (got {args.repeats})")
    if args.target_drop < 0:
        p.error(f"--target-drop must be >= 0 (got {args.target_drop})")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["project"]:  # gnnq-bench project RUN_DIR...: projections of traced runs (docs/projection.md)
        from gnnq.projection.command import main as project_main

        return project_main(argv[1:])
    if argv[:1] == ["tune"]:  # gnnq-bench tune: tune each method, then rerun default and tuned settings (tune.py)
        from gnnq.bench.tune import main as tune_main

        return tune_main(argv[1:])
    args = parse_args(argv)
    command = "gnnq-bench " + " ".join(shlex.quote(a) for a in argv)
    try:
        sweep = resolve_sweep(args.sweep)
        args.out = args.out or Path("results/bench") / sweep[1]
        # Axes come from the sweep file and the command line's comma lists; the rest applies to every run.
        raw = sweep_points(args.overrides, sweep[1], sweep[0])
        points, pairs = build_points(raw, args.baseline, args.pair)
        if args.plot_x and args.plot_x not in {k for k, _ in points[0].setting}:
            raise ConfigError(
                f"--plot-x {args.plot_x}: not a setting axis (axes besides the baseline's: "
                f"{', '.join(k for k, _ in points[0].setting) or 'none'})"
            )
        print(
            f"[gnnq-bench] {len(points)} points x {args.repeats} repeats = {len(points) * args.repeats} runs -> "
            f"{args.out}",
            flush=True,
        )
        run_all(points, sweep, args, extra=[])
        rows = compare(points, args.baseline.partition("=")[2], args.target, args.target_drop, pairs)
        paths = write_outputs(args.out, command, sweep, rows, points, args, pairs)
    except GnnqError as exc:
        print(f"gnnq-bench: {exc}", file=sys.stderr)
        return 2
    failed = sum(len(r["failed"]) for r in rows)
    print((args.out / "README.md").read_text())
    print(f"[gnnq-bench] wrote {', '.join(str(p) for p in paths)}")
    if failed:
        print(f"gnnq-bench: {failed} run(s) failed; they are listed in {args.out / 'README.md'}", file=sys.stderr)
        return 1
    return 0


def main_exit() -> None:
    sys.exit(main())


if __name__ == "__main__":
    main_exit()
