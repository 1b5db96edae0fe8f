"""Command-line entry points: ``gnnq`` (one run, or a sweep with -m) and ``gnnq-report``."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from gnnq.launch.outcome import FAILED_RUNS as _FAILED_RUNS  # the Slurm launcher adds its jobs' failures
from gnnq.launch.outcome import REFUSED_RUNS as _REFUSED_RUNS
from gnnq.launch.outcome import RUNS as _RUNS

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


def _interrupt(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> None:
    # Ctrl-C and SIGTERM (e.g. from a scheduler) both stop all ranks and leave a failed record;
    # installed explicitly because a background launch may inherit SIGINT as ignored.
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    argv = sys.argv[1:] = _with_resolved_config_dir(sys.argv[1:])
    if any(arg.startswith("resume=") for arg in argv):
        _resume(argv)
    if not _NO_PREFLIGHT_FLAGS.intersection(argv):
        from gnnq.config.compose import preflight
        from gnnq.errors import GnnqError

        overrides, multirun, config_name, config_dir = _split_args(argv)
        try:
            preflight(overrides, multirun, config_name, config_dir)
        except GnnqError as exc:
            print(f"gnnq: error: {exc}", file=sys.stderr)
            sys.exit(2)
    try:
        _hydra_entry()
    except KeyboardInterrupt as exc:
        _interrupted(exc)
    if _FAILED_RUNS:
        if len(_RUNS) > 1:  # a sweep: say which of its points failed
            print(f"gnnq: {len(_FAILED_RUNS)} of {len(_RUNS)} runs failed: {', '.join(_FAILED_RUNS)}", file=sys.stderr)
        sys.exit(2 if _REFUSED_RUNS == _FAILED_RUNS else 1)  # only refused places: like a bad config


def _interrupted(exc: KeyboardInterrupt) -> None:
    """Exit as the signal asks: 128 + its number (130 for SIGINT / Ctrl-C, 143 for SIGTERM)."""
    name = str(exc) or "SIGINT"
    print(f"gnnq: interrupted ({name}); all ranks stopped, the run record is marked failed", file=sys.stderr)
    sys.exit(128 + getattr(signal.Signals, name, signal.SIGINT).value)


def _resume(argv: list[str]) -> None:
    """``gnnq resume=<run dir>``: continue that run from its latest checkpoint, with its saved config."""
    from gnnq.errors import GnnqError
    from gnnq.launch.job import resume_job

    if len(argv) != 1:
        others = " ".join(a for a in argv if not a.startswith("resume=")) or "a second resume="
        print(f"gnnq: error: resume=<run dir> continues a run with its saved config and takes nothing else (got also: {others})",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    try:
        record = resume_job(Path(argv[0].split("=", 1)[1]))
    except GnnqError as exc:
        print(f"gnnq: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:
        _interrupted(exc)
    sys.exit(0 if record["status"] == "ok" else 1)


def _hydra_entry() -> None:
    import hydra

    from gnnq.config.compose import CONF_DIR
    from gnnq.config.schema import register_configs

    register_configs()

    @hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
    def _run(cfg) -> None:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        from gnnq.errors import GnnqError
        from gnnq.launch.job import run_job
        from gnnq.launch.run_dir import PlaceError

        hydra_cfg = HydraConfig.get()
        run_dir = Path(hydra_cfg.runtime.output_dir)
        if hydra_cfg.mode == RunMode.MULTIRUN and not cfg.logger.group:
            cfg.logger.group = "sweep-" + "-".join(Path(hydra_cfg.sweep.dir).parts[-2:])  # W&B: a sweep's runs together
        _RUNS.append(str(run_dir))
        try:
            record = run_job(cfg, run_dir)
        except GnnqError as exc:  # the run dir is not free (nothing written), or its record could not be written
            print(f"gnnq: error: {exc}", file=sys.stderr, flush=True)
            _FAILED_RUNS.append(str(run_dir))
            if isinstance(exc, PlaceError):
                _REFUSED_RUNS.append(str(run_dir))
            return
        if record["status"] != "ok":
            _FAILED_RUNS.append(str(run_dir))

    _run()


def report_main() -> None:
    from gnnq.report.summary import main as summary_main

    summary_main(sys.argv[1:])


if __name__ == "__main__":
    main()
