"""Command-line entry points: ``gnnq`` (one run, or a sweep with -m) and ``gnnq-report``."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from gnnq.errors import ConfigError, GnnqError, LaunchError
from gnnq.launch import console, interrupts
from gnnq.launch.outcome import FAILED_RUNS as _FAILED_RUNS  # the Slurm launcher adds its jobs' failures
from gnnq.launch.outcome import REFUSED_RUNS as _REFUSED_RUNS
from gnnq.launch.outcome import RUNS as _RUNS
from gnnq.launch.outcome import SKIPPED_RUNS as _SKIPPED_RUNS
from gnnq.launch.outcome import SWEEP_DIR as _SWEEP

# The imports inside functions keep `gnnq --help` and `gnnq --version` fast: Hydra, torch and the data loaders
# load when a run needs them.
_NO_PREFLIGHT_FLAGS = {"-h", "--help", "--hydra-help", "-i", "--info", "-sc", "--shell-completion", "-p", "--package"}


def _split_args(argv: list[str]) -> tuple[list[str], bool, str, str | None]:
    """Return (overrides, multirun, config name, config dir) from gnnq's command line (Hydra's syntax)."""
    overrides, multirun, config_name, config_dir = [], False, "config", None
    it = iter(argv)
    for arg in it:
        if arg in ("-m", "--multirun"):
            multirun = True
        elif arg in ("-cn", "--config-name"):
            config_name = next(it, config_name)
        elif arg.startswith("--config-name="):
            config_name = arg.split("=", 1)[1]
        elif arg in ("-cd", "--config-dir"):
            config_dir = next(it, None)
        elif arg.startswith("--config-dir="):
            config_dir = arg.split("=", 1)[1]
        elif arg in ("-c", "--cfg", "-cp", "--config-path", "--experimental-rerun"):
            next(it, None)
        elif not arg.startswith("-"):
            overrides.append(arg)
    return overrides, multirun, config_name, config_dir


def _with_resolved_config_dir(argv: list[str]) -> list[str]:
    """``--config-dir sweeps`` means gnnq's shipped sweeps unless ./sweeps exists (Hydra reads it from sys.argv)."""
    from gnnq.config.compose import resolve_config_dir

    out, it = [], iter(argv)
    for arg in it:
        if arg in ("-cd", "--config-dir"):
            value = next(it, None)
            out += [arg] if value is None else [arg, str(resolve_config_dir(value))]
        elif arg.startswith("--config-dir="):
            out.append("--config-dir=" + str(resolve_config_dir(arg.split("=", 1)[1])))
        else:
            out.append(arg)
    return out


def main() -> None:
    # Ctrl-C, SIGTERM (e.g. from a scheduler) and SIGHUP (a closed terminal) stop all ranks and leave a failed
    # record; the exit status is 128 + the first signal's number (gnnq.launch.interrupts)
    interrupts.install()
    # a logging handler that cannot write (W&B's debug log on a full disk) must not print its own tracebacks
    logging.raiseExceptions = False
    try:
        _main()
    except KeyboardInterrupt as exc:
        _interrupted(exc)


def _main() -> None:
    console.install()  # a reader that goes away (gnnq ... | head -1) does not stop the run
    if _help_or_version(sys.argv[1:]):
        return
    try:
        argv, dry_run = _sweep_by_name(sys.argv[1:])
    except GnnqError as exc:
        _refuse(exc)
    argv = sys.argv[1:] = _with_resolved_config_dir(argv)
    _refuse_mixed_modes(argv)
    if any(arg.startswith("resume=") for arg in argv):
        _resume(argv)
    overrides, multirun, config_name, config_dir = _split_args(argv)
    if multirun and _optuna(argv):  # Optuna asks the points as it goes: check the config outside the search space
        from gnnq.config.compose import outside_sweep
        from gnnq.launch.preflight import plan

        try:
            plan(outside_sweep(overrides), False, config_name, config_dir)
        except GnnqError as exc:
            _refuse(exc)
    elif not _NO_PREFLIGHT_FLAGS.intersection(argv):
        from gnnq.launch.preflight import plan

        try:
            points = plan(overrides, multirun, config_name, config_dir)
        except GnnqError as exc:
            _refuse(exc)
        if dry_run or (multirun and _asks_for_cfg(argv)):  # Hydra cannot show a multirun's config
            _show_plan(points, dry_run)
            return
        if multirun and not any(a.startswith("hydra.job.config.override_dirname.exclude_keys=") for a in argv):
            sys.argv.append(_dirname_excludes([p for p, _ in points]))
        if multirun:
            from gnnq.config.compose import shared_group_choices

            try:
                sys.argv += shared_group_choices(overrides, points, config_name, config_dir)
            except GnnqError as exc:
                _refuse(exc)
    try:
        _hydra_entry()
    except KeyboardInterrupt as exc:
        _interrupted(exc)
    if multirun and _SWEEP:  # a sweep ran (not only Hydra's help)
        from gnnq.launch.sweep_plan import summary_lines, table_name

        lines = summary_lines(_SWEEP[0], _RUNS, _FAILED_RUNS, _SKIPPED_RUNS, table_name(config_name, config_dir))
        print("\n".join(lines), flush=True)
    if _FAILED_RUNS:
        if len(_RUNS) > 1:  # a sweep: say which of its points failed
            print(f"gnnq: {len(_FAILED_RUNS)} of {len(_RUNS)} runs failed: {', '.join(_FAILED_RUNS)}", file=sys.stderr)
        sys.exit(2 if _REFUSED_RUNS == _FAILED_RUNS else 1)  # only refused places: like a bad config


def _refuse(exc: Exception) -> None:
    print(f"gnnq: error: {exc}", file=sys.stderr)
    sys.exit(2)


# Hydra's modes: it takes one (a traceback otherwise); gnnq itself serves -m with --cfg (the sweep's points).
_MODES = {
    "-m": "-m",
    "--multirun": "-m",
    "-r": "--run",
    "--run": "--run",
    "-c": "--cfg",
    "--cfg": "--cfg",
    "-i": "--info",
    "--info": "--info",
    "-sc": "--shell-completion",
    "--shell-completion": "--shell-completion",
}


def _refuse_mixed_modes(argv: list[str]) -> None:
    given = sorted({_MODES[a.split("=", 1)[0]] for a in argv if a.split("=", 1)[0] in _MODES})
    if len(given) > 1 and given != ["--cfg", "-m"]:
        _refuse(
            GnnqError(
                f"{' and '.join(given)} cannot be given together: give one of -m, --run, --cfg, --info, "
                "--shell-completion (a sweep's points: gnnq -m ... --dry-run)"
            )
        )


def _help_or_version(argv: list[str]) -> bool:
    """``--help``/``-h`` and ``--version``: gnnq's own (Hydra's help stays under --hydra-help)."""
    from gnnq.cli_help import help_text, version_text

    if "--version" in argv:
        print(version_text())
    elif "-h" in argv or "--help" in argv:
        print(help_text())
    else:
        return False
    return True


def _sweep_by_name(argv: list[str]) -> tuple[list[str], bool]:
    """``sweep=NAME`` (a sweep shipped with gnnq, or a .yaml path) becomes ``-m --config-dir DIR --config-name NAME``;
    ``--dry-run`` is taken out. Returns (argv, dry run)."""
    from gnnq.config.compose import resolve_sweep

    dry_run = "--dry-run" in argv
    argv = [a for a in argv if a != "--dry-run"]
    named = [a for a in argv if a.startswith("sweep=")]
    if not named:
        return argv, dry_run
    if len(named) > 1 or any(
        a in ("-cn", "--config-name", "-cd", "--config-dir") or a.startswith(("--config-name=", "--config-dir="))
        for a in argv
    ):
        raise ConfigError(
            "sweep=NAME names the sweep's config: give it once, and without --config-name or --config-dir"
        )
    config_dir, config_name = resolve_sweep(named[0].split("=", 1)[1])
    rest = [a for a in argv if a != named[0] and a not in ("-m", "--multirun")]
    return ["-m", "--config-dir", config_dir, "--config-name", config_name, *rest], dry_run


def _asks_for_cfg(argv: list[str]) -> bool:
    return any(a in ("-c", "--cfg") or a.startswith("--cfg=") for a in argv)


def _show_plan(points: list, dry_run: bool) -> None:
    from gnnq.launch.sweep_plan import dry_run_lines

    print("\n".join(dry_run_lines(points)))
    if not dry_run:  # -m with --cfg
        print(
            "gnnq: --cfg shows one run's config; for a point's, give its overrides without -m, "
            "e.g. gnnq " + " ".join(points[0][0]) + " --cfg job"
        )


def _dirname_excludes(points: list[list[str]]) -> str:
    """Hydra override that leaves the overrides every point shares out of its job directory names."""
    from gnnq.launch.job_names import shared_keys

    keys = ",".join("'" + k.replace("'", "\\'") + "'" for k in shared_keys(points))
    return f"hydra.job.config.override_dirname.exclude_keys=[{keys}]"


def _interrupted(exc: KeyboardInterrupt) -> None:
    """Exit as the signal asks: 128 + its number (130 for SIGINT / Ctrl-C, 143 for SIGTERM)."""
    name = interrupts.received() or str(exc) or "SIGINT"
    print(f"gnnq: interrupted ({name}); all ranks stopped, the run record is marked failed", file=sys.stderr)
    # The ranks are stopped and the record written: skip the interpreter's teardown, which with torch loaded (a
    # launcher that partitioned) takes seconds of the few a Ctrl-C may take
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(interrupts.exit_code(name))


def _resume(argv: list[str]) -> None:
    """``gnnq resume=<run dir> [allow_changed_data=true]``: continue that run from its latest checkpoint, with its
    saved config; what this attempt prints is appended to the run's cli.log, after the earlier attempts'."""
    from gnnq.launch.job import resume_job
    from gnnq.launch.resume_checks import ALLOW_CHANGED_DATA

    allow = [a for a in argv if a.split("=", 1)[0] == ALLOW_CHANGED_DATA]
    rest = [a for a in argv if a not in allow]
    if len(rest) != 1 or len(allow) > 1:
        others = " ".join(a for a in rest if not a.startswith("resume=")) or "a second resume="
        _refuse(
            GnnqError(
                f"resume=<run dir> continues a run with its saved config and takes nothing else but "
                f"{ALLOW_CHANGED_DATA}=true (got also: {others})"
            )
        )
    value = allow[0].split("=", 1)[1].lower() if allow else "false"
    if value not in ("true", "false"):
        _refuse(ConfigError(f"{ALLOW_CHANGED_DATA}={allow[0].split('=', 1)[1]}: must be true or false"))
    run_dir = Path(rest[0].split("=", 1)[1])
    with _attempt_log(run_dir, argv):
        try:
            record = resume_job(run_dir, allow_changed_data=value == "true")
        except LaunchError as exc:  # it ran, and its record could not be written in its run dir
            print(f"gnnq: error: {exc}", file=sys.stderr)
            sys.exit(1)
        except GnnqError as exc:
            print(f"gnnq: error: {exc}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt as exc:
            _interrupted(exc)
    sys.exit(0 if record["status"] == "ok" else 1)


def _attempt_log(run_dir: Path, argv: list[str]):
    """What a resume prints, appended to ``<run dir>/cli.log`` under a line naming the attempt (nothing where there
    is no run, or the log cannot be written)."""
    import contextlib
    import time

    from gnnq.contract import CONFIG_FILE

    log = run_dir / "cli.log"
    try:
        if not (run_dir / CONFIG_FILE).is_file():
            return contextlib.nullcontext()
        with open(log, "a") as f:
            f.write(f"\n=== gnnq {' '.join(argv)} ({time.strftime('%Y-%m-%dT%H:%M:%S%z')}) ===\n")
    except OSError:
        return contextlib.nullcontext()
    return console.log_to(log)


def _hydra_entry() -> None:
    import hydra

    from gnnq.config.compose import CONF_DIR, register_configs

    register_configs()

    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def _run(cfg) -> None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        from gnnq.config.compose import drop_where_absent
        from gnnq.launch.console import say
        from gnnq.launch.job import run_job
        from gnnq.launch.run_dir import PlaceError

        hydra_cfg = HydraConfig.get()
        run_dir = Path(hydra_cfg.runtime.output_dir)
        multirun = hydra_cfg.mode == RunMode.MULTIRUN
        dropped = drop_where_absent(cfg, list(hydra_cfg.overrides.task))  # ++group.key=V where the choice has key
        if multirun and not cfg.logger.group:
            cfg.logger.group = "sweep-" + "-".join(Path(hydra_cfg.sweep.dir).parts[-2:])  # W&B: a sweep's runs together
        _RUNS.append(str(run_dir))
        with console.log_to(run_dir / f"{hydra_cfg.job.name}.log"):  # Hydra's per-job log: what gnnq printed for it
            try:
                if multirun and _done_earlier(cfg, run_dir, _point_name(hydra_cfg)):
                    return
                for o in dropped:
                    group = o[2:].split(".", 1)[0]
                    say(f"{o} not set: {group}={cfg[group].name} has no such key (++ sets it only where it exists)")
                refused = _refused_trial(cfg, hydra_cfg, run_dir)
                if refused is not None:  # Optuna: FAIL, with the reason; nothing ran
                    _FAILED_RUNS.append(str(run_dir))
                    return refused
                _trial_budget(cfg, hydra_cfg)
                record = run_job(cfg, run_dir)
                value = _objective(run_dir, record)
            except GnnqError as exc:  # the run dir is not free (nothing written), or its record could not be written
                print(f"gnnq: error: {exc}", file=sys.stderr, flush=True)
                _FAILED_RUNS.append(str(run_dir))
                if isinstance(exc, PlaceError):
                    _REFUSED_RUNS.append(str(run_dir))
                return
        if record["status"] != "ok":
            _FAILED_RUNS.append(str(run_dir))
        return value  # a tuning sweep's objective (gnnq.bench.tune), else None

    _run()


def _optuna(argv: list[str]) -> bool:
    from gnnq.bench.tune import is_optuna_sweep

    return is_optuna_sweep(argv)


def _optuna_job(hydra_cfg) -> bool:
    """A trial of Hydra's Optuna sweeper."""
    return "optuna" in str(hydra_cfg.sweeper.get("_target_", "")).lower()


def _refused_trial(cfg, hydra_cfg, run_dir: Path):
    """In a tuning sweep (whose trials no preflight saw), a trial gnnq refuses: its failed record is written, the
    reason printed, and what its job returns to the sweeper (gnnq.bench.tune.FailedTrial); else None."""
    if not _optuna_job(hydra_cfg):
        return None
    from gnnq.bench.tune import refused_trial_record, trial_refusal

    reason = trial_refusal(cfg)
    if reason is None:
        return None
    print(f"gnnq: error: trial refused (not run): {reason}", file=sys.stderr, flush=True)
    return refused_trial_record(cfg, run_dir, reason)


def _trial_budget(cfg, hydra_cfg) -> None:
    """In gnnq-bench tune's trials (the tuner set its target), pruning at the study's incumbent time to target
    (gnnq.bench.tune.prune_at_incumbent): said where it applies."""
    import os

    from gnnq.bench.tune import OBJECTIVE_ENV, prune_at_incumbent
    from gnnq.launch.console import say

    if not os.environ.get(OBJECTIVE_ENV) or not _optuna_job(hydra_cfg):
        return
    budget = prune_at_incumbent(cfg, hydra_cfg.sweeper.storage, hydra_cfg.sweeper.study_name)
    if budget is not None:
        say(f"trial budget: trainer.stop_after_s={budget:.3f}, the best time to target so far (pruned after it)")


def _objective(run_dir: Path, record: dict) -> float | None:
    from gnnq.bench.tune import objective_from_env

    return objective_from_env(run_dir, record)


def _point_name(hydra_cfg) -> str:
    own = hydra_cfg.job.override_dirname  # the overrides that tell this point from the others
    return f"point #{hydra_cfg.job.num}" + (f" ({own})" if own else "")


def _done_earlier(cfg, run_dir: Path, point: str) -> bool:
    """A resumed sweep: True (and says so) when this point finished in an earlier attempt; a failed one is set aside."""
    from omegaconf import OmegaConf

    from gnnq.launch.console import say
    from gnnq.launch.run_dir import claim_run_dir, release_run_dir
    from gnnq.launch.sweep_state import earlier_attempt

    if cfg.get("overwrite", False):
        return False
    claim_run_dir(run_dir, "hydra.sweep.dir", resuming=True)  # held while its earlier attempt is looked at
    try:
        action, line = earlier_attempt(run_dir, OmegaConf.to_container(cfg, resolve=True), point)
    except GnnqError:
        release_run_dir(run_dir)
        raise
    if line:
        say(line)
    if action == "skip":
        release_run_dir(run_dir)
        _SKIPPED_RUNS.append(str(run_dir))
        return True
    return False


def report_main() -> None:
    """``gnnq-report``: SIGINT, SIGTERM and SIGHUP stop it with one line and 128 + the signal's number; its files
    are written whole or not at all (gnnq.report.output), so a stop leaves no partial one."""
    interrupts.install()
    try:
        from gnnq.report.summary import main as summary_main

        summary_main(sys.argv[1:])
    except KeyboardInterrupt as exc:
        name = interrupts.received() or str(exc) or "SIGINT"
        print(f"gnnq-report: interrupted ({name}); every file it wrote is whole, none is partial", file=sys.stderr)
        sys.exit(interrupts.exit_code(name))


if __name__ == "__main__":
    main()
