"""Tune, then rank: each method's search space (gnnq.config.search_space) searched by Hydra's Optuna sweeper through
gnnq's own multirun (the warm launcher), its best setting rerun on fresh seeds beside its default setting, and both
ranked by time to the target validation metric (gnnq-report --criterion time: bootstrap intervals, ties).

``gnnq-bench tune --method pipegcn --dataset cora --target cora=0.78 --trials 20 --out DIR`` (the ``tune`` extra:
hydra-optuna-sweeper). Per (dataset, method) the study lives in ``DIR/tune/<dataset>/<method>/optuna.db`` (Optuna's
RDB storage, SQLite): running the same command again resumes it, running only the trials still missing (a killed
tuning loses only the trial it was in; its run dir stays as ``attempt<k>-<n>``, never reused).

Objective: training seconds (epochs and overheads) until validation first reaches the target, within the fixed epoch
budget (``trainer.epochs``); a trial that never reaches it scores ``UNREACHED_S * (1 + target - best val)``, worse
than any that does, and closer is better. Pruning: Hydra's Optuna sweeper asks a trial, launches the run as a job with
only its overrides and tells the value when the job returns, so a run has no Optuna ``Trial`` to report epochs to and
per-epoch pruning is not possible on this path; every trial runs its whole (small) epoch budget instead, and the
objective reads the run's per-epoch curve (metrics.jsonl).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gnnq.errors import GnnqError

OBJECTIVE_ENV = "GNNQ_TUNE_TARGET"  # set by the tuner: gnnq's multirun job returns the objective for this target
UNREACHED_S = 1e6
STORAGE_FILE = "optuna.db"
GNNQ = [sys.executable, "-m", "gnnq.cli"]  # this environment's gnnq, whatever PATH holds


def objective(run_dir: Path, record: dict, target: float) -> float:
    """Seconds to ``target`` (epochs and overheads); a failed run is NaN (Optuna marks the trial failed)."""
    from gnnq.report.curves import read_curve, time_to_target

    if record.get("status") != "ok":
        return float("nan")
    reached = time_to_target(read_curve(run_dir), target)
    if reached is not None:
        return reached
    best = record.get("best_val") or 0.0
    return UNREACHED_S * (1.0 + max(0.0, target - best))


def objective_from_env(run_dir: Path, record: dict) -> float | None:
    """The objective where the tuner asked for one (OBJECTIVE_ENV), else None (a plain sweep returns nothing)."""
    target = os.environ.get(OBJECTIVE_ENV)
    return None if not target else objective(run_dir, record, float(target))


def is_optuna_sweep(argv: list[str]) -> bool:
    return any(a.lstrip("+") == "hydra/sweeper=optuna" for a in argv)


@dataclass
class Study:
    """One (dataset, method) study: where it lives and what it searches."""

    dataset: str
    method: str  # an experiment= preset
    root: Path
    base: list[str] = field(default_factory=list)  # overrides of every run (ranks, epochs)
    sweep: tuple[str, str] | None = None  # (config dir, config name) of the sweep file the runs compose from

    @property
    def dir(self) -> Path:
        return self.root / "tune" / self.dataset / self.method

    @property
    def storage(self) -> str:
        return f"sqlite:///{(self.dir / STORAGE_FILE).resolve()}"

    @property
    def name(self) -> str:
        return f"{self.dataset}-{self.method}"

    def overrides(self) -> list[str]:
        return [f"experiment={self.method}", f"dataset={self.dataset}", *self.base]

    def config_args(self) -> list[str]:
        """``--config-dir D --config-name N`` of the sweep file (none: gnnq's own config)."""
        return [] if self.sweep is None else ["--config-dir", self.sweep[0], "--config-name", self.sweep[1]]


def finished_trials(study: Study) -> list:
    """The study's complete trials ([] before its first); trials left running by a killed tuning are not counted."""
    import optuna

    if not (study.dir / STORAGE_FILE).is_file():
        return []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        s = optuna.load_study(study_name=study.name, storage=study.storage)
    except KeyError:
        return []
    return [t for t in s.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]


def method_space(study: Study) -> dict[str, str]:
    """The method's space: its preset's parallel and quantizer choices' declarations."""
    from gnnq.config.compose import compose_config
    from gnnq.config.search_space import search_space

    cfg = compose_config(study.overrides(), *(reversed(study.sweep) if study.sweep else ()))
    return search_space(cfg.parallel.name, cfg.quantizer.name)


def tune_command(study: Study, trials: int, seed: int, attempt: int) -> list[str]:
    """``gnnq -m`` with Hydra's Optuna sweeper over the method's space: ``trials`` more trials of the study, run dirs
    ``attempt<k>-<n>`` (a resumed study never reuses an earlier attempt's directory)."""
    from gnnq.config.search_space import overrides

    return [
        *GNNQ,
        "-m",
        *study.config_args(),
        *study.overrides(),
        f"trainer.seed={seed}",
        "hydra/sweeper=optuna",
        "hydra.sweeper.direction=minimize",
        f"hydra.sweeper.study_name={study.name}",
        f"hydra.sweeper.storage={study.storage}",
        f"hydra.sweeper.n_trials={trials}",
        "hydra.sweeper.n_jobs=1",  # told after each trial: a killed tuning loses only the running trial
        f"hydra.sweeper.sampler.seed={seed}",
        f"hydra.sweep.dir={study.dir}",
        f"hydra.sweep.subdir=attempt{attempt}-${{hydra.job.num}}",
        *overrides(method_space(study)),
    ]


def tune(study: Study, trials: int, target: float, seed: int, say=print) -> list:
    """Run the trials the study still lacks (up to ``trials`` complete ones); return its complete trials."""
    done = finished_trials(study)
    missing = trials - len(done)
    if missing <= 0:
        say(f"[gnnq-bench] tune {study.name}: {len(done)} of {trials} trials done, nothing to run")
        return done
    study.dir.mkdir(parents=True, exist_ok=True)
    attempt = len(list(study.dir.glob("attempt*-0")))
    cmd = tune_command(study, missing, seed, attempt)
    say(f"[gnnq-bench] tune {study.name}: {len(done)} of {trials} trials done, running {missing}: {shlex.join(cmd)}")
    res = subprocess.run(cmd, env={**os.environ, OBJECTIVE_ENV: str(target)})
    if res.returncode not in (0, 1):  # 1: some trial's run failed (a failed trial, recorded as such)
        raise GnnqError(f"tuning {study.name} stopped with exit code {res.returncode}")
    return finished_trials(study)


def best_overrides(trials: list) -> list[str]:
    """The best complete trial's parameters as overrides (its value the lowest)."""
    best = min(trials, key=lambda t: t.value)
    return [f"{k}={v}" for k, v in sorted(best.params.items())]


def rerun(study: Study, setting: list[str], seeds: list[int], where: Path) -> int:
    """The method at ``setting`` on ``seeds`` (a plain gnnq multirun) in ``where``; its exit code."""
    cmd = [
        *GNNQ,
        "-m",
        *study.config_args(),
        *study.overrides(),
        *setting,
        f"trainer.seed={','.join(map(str, seeds))}",
        f"hydra.sweep.dir={where}",
    ]
    print(f"[gnnq-bench] {shlex.join(cmd)}", flush=True)
    return subprocess.run(cmd, env={k: v for k, v in os.environ.items() if k != OBJECTIVE_ENV}).returncode


def _targets(text: list[str]) -> dict[str, float]:
    out = {}
    for item in text:
        name, sep, value = item.partition("=")
        if not sep:
            raise GnnqError(f"--target {item!r}: expected DATASET=VALUE, e.g. cora=0.78")
        out[name] = float(value)
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gnnq-bench tune", description=__doc__.split("\n\n")[0])
    p.add_argument("--sweep", help="a sweep file (name or path): its dataset and experiment axes, its settings")
    p.add_argument(
        "--method", action="append", default=[], help="an experiment= preset; repeatable (default: the sweep's)"
    )
    p.add_argument(
        "--dataset", action="append", default=[], help="a dataset= choice; repeatable (default: the sweep's)"
    )
    p.add_argument("--target", action="append", required=True, help="DATASET=VALUE: the validation target; repeatable")
    p.add_argument("--trials", type=int, default=20, help="complete trials per method and dataset (default 20)")
    p.add_argument("--tuning-seed", type=int, default=0, help="the seed of every trial and of the sampler")
    p.add_argument("--final-seeds", default="100,101,102", help="seeds of the default and tuned reruns")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("overrides", nargs="*", help="overrides of every run (cluster.nproc=2 trainer.epochs=30)")
    if argv and not argv[0].startswith("-") and "=" not in argv[0]:  # gnnq-bench tune SWEEP ...
        argv = ["--sweep", *argv]
    return p.parse_args(argv)


def sweep_axes(sweep: tuple[str, str]) -> dict[str, list[str]]:
    """The sweep file's axes (``hydra.sweeper.params``) as lists of values."""
    from gnnq.config.compose import sweep_points

    axes: dict[str, list[str]] = {}
    for point in sweep_points([], sweep[1], sweep[0]):
        for override in point:
            key, _, value = override.partition("=")
            axes.setdefault(key, [])
            if value not in axes[key]:
                axes[key].append(value)
    return axes


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    seeds = [int(s) for s in args.final_seeds.split(",")]
    if args.tuning_seed in seeds:
        print(
            f"gnnq-bench tune: the final seeds {seeds} must differ from the tuning seed {args.tuning_seed}",
            file=sys.stderr,
        )
        return 2
    try:
        from gnnq.config.compose import resolve_sweep

        sweep = resolve_sweep(args.sweep) if args.sweep else None
        axes = sweep_axes(sweep) if sweep else {}
        methods, datasets = args.method or axes.get("experiment", []), args.dataset or axes.get("dataset", [])
        if not methods or not datasets:
            raise GnnqError("name the methods and datasets (--method, --dataset) or a sweep file that has them as axes")
        targets = _targets(args.target)
        missing = [d for d in datasets if d not in targets]
        if missing:
            raise GnnqError(f"no --target for {', '.join(missing)}")
        for dataset in datasets:
            for method in methods:
                study = Study(dataset, method, args.out, list(args.overrides), sweep)
                trials = tune(study, args.trials, targets[dataset], args.tuning_seed)
                if not trials:
                    raise GnnqError(f"tuning {study.name}: no trial completed")
                rerun(study, [], seeds, args.out / "default" / dataset / method)
                rerun(study, best_overrides(trials), seeds, args.out / "tuned" / dataset / method)
    except GnnqError as exc:
        print(f"gnnq-bench tune: {exc}", file=sys.stderr)
        return 2
    return 0
