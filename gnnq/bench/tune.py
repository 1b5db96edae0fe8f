"""Tune, then rank: each method's search space (gnnq.config.search_space) searched by Hydra's Optuna sweeper through
gnnq's own multirun (the warm launcher), its best setting rerun on fresh seeds beside its default setting, and both
ranked by time to the target validation metric (gnnq-report --criterion time: bootstrap intervals, ties).

``gnnq-bench tune --method pipegcn --dataset cora --target cora=0.78 --trials 20 --out DIR`` (the ``tune`` extra:
hydra-optuna-sweeper). Per (dataset, method) the study lives in ``DIR/tune/<dataset>/<method>/optuna.db`` (Optuna's
RDB storage, SQLite): running the same command again resumes it, running only the trials still missing (a killed
tuning loses only the trial it was in; its run dir stays as ``attempt<k>-<n>``, never reused).

Objective: training seconds (epochs and overheads) until validation first reaches the target, within the fixed epoch
budget (``trainer.epochs``); a trial that never reaches it scores ``UNREACHED_S * (1 + target - best val)``, worse
than any that does, and closer is better. The objective reads the run's per-epoch curve (metrics.jsonl).

A trial runs no longer than its value needs, decided per epoch from gnnq's epoch rows on every rank
(gnnq.train.driver.early_stop, no message between ranks): it stops at the target (``trainer.stop_at_val``: the
epochs after it cannot change its time to target), and it is pruned at the study's incumbent
(``trainer.stop_after_s`` = the best time to target of the study's complete trials, read from its Optuna storage
when the trial starts): a trial still short of the target then can no longer become the best. A pruned trial
scores as one that did not reach the target (so the sampler learns it as such, not as a slower reach). (Optuna's
own per-epoch ``Trial.report``/``should_prune`` are not used: Hydra's Optuna sweeper gives the job no ``Trial``,
and a decision made on rank 0 per epoch would need a message to the other ranks every epoch.)

Failures: a trial's config is checked as gnnq checks every point of a plain sweep (``trial_refusal``) before it runs;
a refused or failed trial is Optuna's FAIL (``FailedTrial``), named, never scored. A method whose tuning or rerun
fails is a missing row (gnnq.bench.tune_failures): said at once, listed at the end, and tune exits 1 after the other
methods ran.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gnnq.bench.tune_failures import MissingRow, error_line, report_missing, run_keeping_stderr
from gnnq.errors import GnnqError

OBJECTIVE_ENV = "GNNQ_TUNE_TARGET"  # set by the tuner: gnnq's multirun job returns the objective for this target
UNREACHED_S = 1e6
STORAGE_FILE = "optuna.db"
GNNQ = [sys.executable, "-m", "gnnq.cli"]  # this environment's gnnq, whatever PATH holds


class FailedTrial:
    """What a tuning job returns for a run that failed or a trial config gnnq refuses: Hydra's Optuna sweeper cannot
    make a float of it, so it tells Optuna the trial FAILED and logs ``Failed experiment: ... Got '<reason>'``. (A NaN
    would not do: the sweeper then tells FAIL with the NaN as value, Optuna refuses that, and the whole sweep stops.)"""

    def __init__(self, reason: str):
        self.reason = reason

    def __float__(self) -> float:
        raise ValueError(self.reason)

    def __str__(self) -> str:
        return f"trial failed: {self.reason}"

    def __repr__(self) -> str:
        return f"FailedTrial({self.reason!r})"


def objective(run_dir: Path, record: dict, target: float) -> float | FailedTrial:
    """Seconds to ``target`` (epochs and overheads); a failed run is a FailedTrial (Optuna: FAIL) with its error."""
    from gnnq.report.curves import read_curve, time_to_target

    if record.get("status") != "ok":
        return FailedTrial(record.get("error") or "the run failed")
    reached = time_to_target(read_curve(run_dir), target)
    if reached is not None:
        return reached
    best = record.get("best_val") or 0.0
    return UNREACHED_S * (1.0 + max(0.0, target - best))


def objective_from_env(run_dir: Path, record: dict) -> float | FailedTrial | None:
    """The objective where the tuner asked for one (OBJECTIVE_ENV), else None (a plain sweep returns nothing)."""
    target = os.environ.get(OBJECTIVE_ENV)
    return None if not target else objective(run_dir, record, float(target))


def incumbent_seconds(storage: str, study_name: str) -> float | None:
    """The study's best time to target so far: its best complete trial's value if that trial reached the target,
    else None (no complete trial yet, or none reached it)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=study_name, storage=storage)
    except KeyError:  # the study is not created yet
        return None
    done = [t.value for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]
    reached = [v for v in done if v is not None and v < UNREACHED_S]
    return min(reached) if reached else None


def prune_at_incumbent(cfg, storage: str, study_name: str) -> float | None:
    """A tuning trial's budget: ``cfg.trainer.stop_after_s`` set to the study's incumbent time to target (kept where
    a smaller one is set); the budget set, or None (no incumbent: the trial runs its epochs)."""
    incumbent = incumbent_seconds(storage, study_name)
    if incumbent is None:
        return None
    own = cfg.trainer.get("stop_after_s")
    cfg.trainer.stop_after_s = incumbent if own is None else min(own, incumbent)
    return cfg.trainer.stop_after_s


def trial_refusal(cfg) -> str | None:
    """Why gnnq refuses a trial's config (the checks every point of a plain sweep passes before anything runs:
    gnnq.config.validate and gnnq.launch.preflight.check_point), or None. Hydra's Optuna sweeper composes each trial
    as it asks it, so a trial's values (e.g. ``quantizer.assign_cycle=50`` with ``trainer.epochs=30``) are checked
    here, in the trial's job, before it runs."""
    from omegaconf.errors import OmegaConfBaseException

    from gnnq.config.validate import validate
    from gnnq.launch.preflight import check_point

    try:
        validate(cfg)
        check_point(cfg)
    except GnnqError as exc:
        return str(exc)
    except OmegaConfBaseException as exc:  # a missing value or broken interpolation
        return str(exc).splitlines()[0]
    return None


def refused_trial_record(cfg, run_dir: Path, reason: str) -> FailedTrial:
    """A refused trial leaves a failed record.json (nothing ran) naming the reason; what its job returns."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from gnnq.contract import RECORD_FILE
    from gnnq.track.files import write_json_atomic
    from gnnq.track.record import build_record

    error = f"trial refused before it ran: {reason}"
    try:
        config = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException:  # the refusal may be a value that does not resolve
        config = OmegaConf.to_container(cfg, resolve=False)
    record = build_record(config, "failed", error=error, extra={"run_dir": str(run_dir)})
    write_json_atomic(run_dir / RECORD_FILE, record)
    return FailedTrial(error)


def failed_trials_lines(study: "Study", attempt: int) -> list[str]:
    """One line per run of tuning attempt ``attempt`` that failed or was refused, with its record's error."""
    import json

    from gnnq.contract import RECORD_FILE

    lines = []
    for run_dir in sorted(study.dir.glob(f"attempt{attempt}-*"), key=lambda d: int(d.name.rpartition("-")[2])):
        try:
            record = json.loads((run_dir / RECORD_FILE).read_text())
        except (OSError, ValueError):
            lines.append(f"{run_dir.name}: no record (the trial did not finish)")
            continue
        if record.get("status") != "ok":
            lines.append(f"{run_dir.name}: {record.get('error')}")
    return lines


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


def tune_command(study: Study, trials: int, target: float, seed: int, attempt: int) -> list[str]:
    """``gnnq -m`` with Hydra's Optuna sweeper over the method's space: ``trials`` more trials of the study, each
    stopping at ``target``; run dirs ``attempt<k>-<n>`` (a resumed study never reuses an earlier attempt's
    directory)."""
    from gnnq.config.search_space import overrides

    return [
        *GNNQ,
        "-m",
        *study.config_args(),
        *study.overrides(),
        f"trainer.seed={seed}",
        f"trainer.stop_at_val={target}",  # a trial's value is its time to target: the epochs after it change nothing
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
    cmd = tune_command(study, missing, target, seed, attempt)
    say(f"[gnnq-bench] tune {study.name}: {len(done)} of {trials} trials done, running {missing}: {shlex.join(cmd)}")
    res = subprocess.run(cmd, env={**os.environ, OBJECTIVE_ENV: str(target)})
    for line in failed_trials_lines(study, attempt):  # Optuna: FAIL, not scored
        say(f"[gnnq-bench] tune {study.name}: trial failed (not scored): {line}")
    if res.returncode not in (0, 1):  # 1: some trial's run failed or was refused (FAIL in the study)
        raise GnnqError(f"tuning {study.name} stopped with exit code {res.returncode}")
    done = finished_trials(study)
    if len(done) < trials:  # a failed trial took one of the sweeper's n_trials
        say(
            f"[gnnq-bench] tune {study.name}: {len(done)} of {trials} trials complete (failed trials count toward "
            "the sweeper's trials); the same command runs the missing ones"
        )
    return done


def best_overrides(trials: list) -> list[str]:
    """The best complete trial's parameters as overrides (its value the lowest)."""
    best = min(trials, key=lambda t: t.value)
    return [f"{k}={v}" for k, v in sorted(best.params.items())]


def rerun(study: Study, setting: list[str], seeds: list[int], where: Path) -> tuple[int, str]:
    """The method at ``setting`` on ``seeds`` (a plain gnnq multirun) in ``where``; its exit code and error line."""
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
    code, stderr = run_keeping_stderr(cmd, {k: v for k, v in os.environ.items() if k != OBJECTIVE_ENV})
    return code, error_line(stderr) if code else ""


def rank_method(study: Study, trials: int, target: float, tuning_seed: int, seeds: list[int]) -> list[MissingRow]:
    """Tune one (dataset, method), rerun its default and best settings on ``seeds``; the rows that could not be made
    (each said at once, on stderr). A failed tuning or rerun stops only this method."""
    missing: list[MissingRow] = []

    def miss(setting: str, overrides: list[str], code: int | None, error: str) -> None:
        row = MissingRow(study.method, study.dataset, setting, tuple(overrides), code, error)
        print(f"gnnq-bench tune: missing row: {row.line()}", file=sys.stderr, flush=True)
        missing.append(row)

    try:
        done, tuning_error = tune(study, trials, target, tuning_seed), ""
    except GnnqError as exc:
        done, tuning_error = [], str(exc)
    if not done and not tuning_error:
        tuning_error = f"tuning {study.name}: no trial completed (the failed trials are named above)"
    code, error = rerun(study, [], seeds, study.root / "default" / study.dataset / study.method)
    if code:
        miss("default", [], code, error)
    if tuning_error:
        miss("tuned", [], None, tuning_error)
        return missing
    best = best_overrides(done)
    code, error = rerun(study, best, seeds, study.root / "tuned" / study.dataset / study.method)
    if code:
        miss("tuned", best, code, error)
    return missing


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
    p.add_argument(
        "--trials",
        type=int,
        default=20,
        help="trials per method and dataset (default 20); a failed one takes a place, running again fills it",
    )
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
        untargeted = [d for d in datasets if d not in targets]
        if untargeted:
            raise GnnqError(f"no --target for {', '.join(untargeted)}")
        missing = [
            row
            for dataset in datasets
            for method in methods
            for row in rank_method(
                Study(dataset, method, args.out, list(args.overrides), sweep),
                args.trials,
                targets[dataset],
                args.tuning_seed,
                seeds,
            )
        ]
    except GnnqError as exc:
        print(f"gnnq-bench tune: {exc}", file=sys.stderr)
        return 2
    lines = report_missing(missing, args.out)
    if lines:
        print("\n".join(lines), file=sys.stderr, flush=True)
    return 1 if missing else 0
