"""One experiment, as a pipeline of steps each in its own module: the composed, checked config (gnnq.config.compose,
gnnq.launch.preflight) → claim the run dir (run_dir) → prepare data and parts (prepare) → place and start the ranks
(start, clusters/) → collect rank 0's result (collect) → write the record (conclude)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnq.contract import CONFIG_FILE, INTERNAL_DIR, RECORD_FILE, RESUME_FILE
from gnnq.errors import ConfigError
from gnnq.launch import interrupts
from gnnq.launch.conclude import conclude, failure_line, interrupted
from gnnq.launch.console import say
from gnnq.launch.prepare import prepare_data
from gnnq.launch.resume_checks import check_resume, earlier_record
from gnnq.launch.run_dir import claim_run_dir, clear_earlier_attempt, release_run_dir
from gnnq.launch.start import start_ranks
from gnnq.track.files import write_json_atomic, write_text_atomic
from gnnq.track.progress import summary_table
from gnnq.track.record import build_record
from gnnq.track.wandb_logger import NullLogger, make_logger


def run_job(cfg: DictConfig, run_dir: Path, extra: dict | None = None) -> dict:
    """Run one experiment in ``run_dir``; always leaves a complete record.json and returns it.

    PlaceError (nothing written) when ``run_dir`` is not free: see gnnq.launch.run_dir.claim_run_dir."""
    run_dir = claim_run_dir(run_dir, overwrite=bool(cfg.get("overwrite", False)))
    try:
        return _run_claimed(cfg, run_dir, extra)
    finally:
        release_run_dir(run_dir)  # a sweep's finished points are free again at once


def _run_claimed(cfg: DictConfig, run_dir: Path, extra: dict | None) -> dict:
    config = OmegaConf.to_container(cfg, resolve=True)
    write_text_atomic(run_dir / CONFIG_FILE, OmegaConf.to_yaml(config))
    say(f"run dir: {run_dir}")
    if "assign_cycle" in cfg.quantizer and OmegaConf.is_interpolation(cfg.quantizer, "assign_cycle"):
        say(
            f"quantizer.assign_cycle={config['quantizer']['assign_cycle']}: the default, a quarter of "
            f"trainer.epochs={cfg.trainer.epochs} (AdaQP's 4 assignments per run); set quantizer.assign_cycle to fix it"
        )
    extra = {"run_dir": str(run_dir), **(extra or {})}
    started = time.time()
    logger = NullLogger()
    try:
        logger = make_logger(cfg, run_dir, resume=(run_dir / INTERNAL_DIR / RESUME_FILE).is_file())
        parts_dir, meta = prepare_data(cfg)
        if "dataset_fingerprint" in meta:  # a files graph: reports tell graphs apart by it (gnnq.config.dataset_name)
            extra["dataset_fingerprint"] = meta.pop("dataset_fingerprint")
        extra["partition"] = meta
        summary = start_ranks(cfg, run_dir, parts_dir, logger.log_epoch)
        record = build_record(config, "ok", summary, extra=extra)
    except KeyboardInterrupt as exc:
        interrupted(run_dir, config, extra, logger, started, interrupts.received() or str(exc) or "SIGINT")
        raise
    except Exception as exc:  # noqa: BLE001 - an unexpected bug still leaves a failed record
        if interrupts.received():  # the signal surfaced as another error (METIS' C++ turns it into a RuntimeError)
            interrupted(run_dir, config, extra, logger, started, interrupts.received())
            raise KeyboardInterrupt(interrupts.received()) from None
        record = build_record(config, "failed", error=failure_line(exc, run_dir), extra=extra)
    conclude(run_dir, record, logger, started)
    if record["status"] == "ok":
        print(summary_table(record), flush=True)
    else:
        print(f"gnnq: error: {record['error']}", file=sys.stderr, flush=True)
    return record


def resume_job(run_dir: Path, allow_changed_data: bool = False) -> dict:
    """Continue the run in ``run_dir`` from its latest checkpoint, with its saved config; returns the new record.

    New code since the earlier attempt is a warning; changed data is refused unless ``allow_changed_data``
    (gnnq.launch.resume_checks)."""
    run_dir = Path(run_dir)
    if not (run_dir / CONFIG_FILE).is_file():
        raise ConfigError(f"resume={run_dir}: no {CONFIG_FILE} there; give the directory of a gnnq run")
    claim_run_dir(run_dir, "resume", resuming=True)  # not while another gnnq runs in it
    from gnnq.train.checkpoint import verify_checkpoint  # here: a new run's launcher does not import torch

    latest = verify_checkpoint(run_dir)  # every rank's file, before anything starts
    previous = run_dir / RECORD_FILE
    if previous.is_file() and json.loads(previous.read_text()).get("status") == "ok":
        raise ConfigError(f"resume={run_dir}: the run finished (record.json status ok); there is nothing to resume")
    cfg = OmegaConf.load(run_dir / CONFIG_FILE)
    attempts = check_resume(cfg, run_dir, earlier_record(run_dir), allow_changed_data)
    internal, logs = run_dir / INTERNAL_DIR, run_dir / "logs"
    clear_earlier_attempt(run_dir)  # the interrupted attempt's hand-offs must not speak for this one
    for log in [*logs.glob("torchrun.log"), *logs.glob("torchrun-h*.log")]:  # one per host under cluster=emulated
        if "-until-epoch-" in log.name:
            continue  # an earlier attempt's, already kept
        log.replace(kept_log_path(log, latest["epoch"]))
    say(f"resuming from the checkpoint of epoch {latest['epoch']}")
    marker = internal / RESUME_FILE
    write_json_atomic(marker, {"from_epoch": latest["epoch"], "at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    try:
        return run_job(cfg, run_dir, extra={"resumed_from_epoch": latest["epoch"], "earlier_attempts": attempts})
    finally:
        marker.unlink(missing_ok=True)


def kept_log_path(log: Path, epoch: int) -> Path:
    """Where an interrupted attempt's log is kept: ``<stem>-until-epoch-<epoch>.log``, or ``...-<k>.log`` when an
    earlier attempt already ended at that checkpoint (a resume that failed again before its next one)."""
    kept = log.with_name(f"{log.stem}-until-epoch-{epoch}.log")
    k = 2
    while kept.exists():
        kept = log.with_name(f"{log.stem}-until-epoch-{epoch}-{k}.log")
        k += 1
    return kept
