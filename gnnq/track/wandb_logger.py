"""Weights & Biases logging from the launcher (offline by default; no account needed).

The launcher owns the W&B run: it logs every epoch row as rank 0 reports it, and once record.json
is written it sets the run's summary from the record (``wandb_summary``), attaches record.json,
config.yaml and metrics.jsonl as an artifact and finishes the run. So the W&B summary is the record,
field for field, on success and on failure, and no late history row can overwrite it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnq.config.clusters import world_size
from gnnq.config.dataset_name import graph_name
from gnnq.contract import CONFIG_FILE, INTERNAL_DIR, METRICS_FILE, RECORD_FILE
from gnnq.errors import ConfigError, GnnqError
from gnnq.track.files import json_safe, write_text_atomic
from gnnq.track.record import read_metric_rows, set_aside_attempts

WANDB_DIR = "wandb"  # under the run dir (W&B's own folder name; a sweep sets an earlier attempt's aside)
FAILED_TAG = "failed"  # the tag (and name suffix) of a W&B run whose gnnq run failed

RUN_ID_FILE = "wandb_run_id"  # under the run's .gnnq/: a resumed run logs to the same W&B run
ARTIFACT_TYPE = "run-record"
SUMMARY_OBJECTS = ("machine", "versions")  # record fields that are objects and still go to the W&B summary


class NullLogger:
    def log_epoch(self, row: dict) -> None:
        pass

    def close(self, record: dict, run_dir: Path) -> None:
        pass


def wandb_group(cfg: DictConfig) -> str:
    """``logger.group`` (set for every point of a multirun), else dataset-model-parallel-quantizer."""
    if cfg.logger.group:
        return cfg.logger.group
    return f"{graph_name(cfg.dataset)}-{cfg.model.name}-{cfg.parallel.name}-{cfg.quantizer.name}"


def wandb_run_name(cfg: DictConfig) -> str:
    """dataset-model-parallel-quantizer-seed, e.g. ``cora-gcn-sync-uniform4-seed0`` (a fixed width is named)."""
    quantizer = f"uniform{cfg.quantizer.bits}" if cfg.quantizer.name == "uniform" else cfg.quantizer.name
    return f"{graph_name(cfg.dataset)}-{cfg.model.name}-{cfg.parallel.name}-{quantizer}-seed{cfg.trainer.seed}"


def wandb_summary(record: dict) -> dict:
    """The W&B summary of a run: every scalar (number, string, bool, null) of record.json's ``summary``
    and of the record itself, by the same names (the record's own field where both have one: they are
    equal), plus its ``machine`` and ``versions``. Non-finite numbers are null, as in the record."""
    record = json_safe(record)

    def scalars(d: dict) -> dict:
        return {k: v for k, v in d.items() if v is None or isinstance(v, (bool, int, float, str))}

    return {
        **scalars(record.get("summary") or {}),
        **scalars(record),
        **{k: record[k] for k in SUMMARY_OBJECTS if k in record},
    }


def wandb_run_id(run_dir: Path, resume: bool) -> str:
    """The run's W&B id: new for a new run, the one it started with when it resumes."""
    import secrets

    path = Path(run_dir) / INTERNAL_DIR / RUN_ID_FILE
    if resume and path.is_file():
        return path.read_text().strip()
    run_id = secrets.token_hex(6)  # W&B ids: letters and digits, unique within the project
    write_text_atomic(path, run_id)
    return run_id


WANDB_MODES = ("online", "offline", "shared", "disabled", "dryrun", "run")  # what W&B's settings accept


def check_wandb_mode_env() -> None:
    """An unknown WANDB_MODE in the environment overrides logger.mode inside W&B and fails there with a pydantic
    error that names neither: name the variable and what it may hold."""
    mode = os.environ.get("WANDB_MODE")
    if mode is not None and mode not in WANDB_MODES:
        raise ConfigError(
            f"WANDB_MODE={mode} (in the environment) is not allowed; allowed: {', '.join(WANDB_MODES)}; "
            "unset it to use logger.mode, or use logger=none"
        )


class WandbLogger(NullLogger):
    def __init__(self, cfg: DictConfig, run_dir: Path, resume: bool = False):
        import wandb

        check_wandb_mode_env()

        choices = {
            "dataset": graph_name(cfg.dataset),
            "model": cfg.model.name,
            "partitioner": cfg.partitioner.name,
            "quantizer": cfg.quantizer.name,
            "parallel": cfg.parallel.name,
        }
        if os.environ.get("WANDB_DIR"):  # W&B would put its files there; gnnq keeps them beside the run's record
            print(
                f"[gnnq] W&B files go to {Path(run_dir) / WANDB_DIR} (WANDB_DIR={os.environ['WANDB_DIR']} is not "
                "used: a run's W&B files stay in its run dir)",
                flush=True,
            )
        world = world_size(cfg)
        # a sweep point run again after failed attempts (set aside as *.failed-<n>): attempt n+1, so tagged
        attempt = max(set_aside_attempts(run_dir), default=0) + 1
        try:
            self.run = wandb.init(
                project=cfg.logger.project,
                entity=cfg.logger.entity,
                mode=cfg.logger.mode,
                dir=str(run_dir),
                id=wandb_run_id(run_dir, resume),
                resume="allow" if resume else None,
                name=wandb_run_name(cfg),
                group=wandb_group(cfg),
                job_type="train",
                # W&B's own lines: where the run is saved, not its history and summary (the record has them);
                # WANDB_QUIET / WANDB_SILENT in the environment decide instead
                settings=None if {"WANDB_QUIET", "WANDB_SILENT"} & set(os.environ) else wandb.Settings(quiet=True),
                tags=[f"{k}:{v}" for k, v in choices.items()]
                + [f"ranks:{world}", f"attempt:{attempt}"]
                + list(cfg.logger.tags),
                config=OmegaConf.to_container(cfg, resolve=True),
            )
        except Exception as exc:  # noqa: BLE001 - wandb raises many kinds (no login, no network, bad entity)
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise GnnqError(
                f"logger=wandb (logger.mode={cfg.logger.mode}): W&B could not start the run: {first}; "
                "use logger.mode=offline or logger=none"
            ) from exc
        # History is indexed by epoch. No row value becomes a summary value: the summary is the record's,
        # set in close() (a last row's test or epoch time is not the run's); the best validation is kept too.
        self.run.define_metric("epoch", summary="none")
        self.run.define_metric("*", step_metric="epoch", summary="none")
        self.run.define_metric("val", step_metric="epoch", summary="max")
        self.last_epoch = 0

    def log_epoch(self, row: dict) -> None:
        self.run.log({k: v for k, v in json_safe(row).items() if v is not None})
        self.last_epoch = row["epoch"]

    def close(self, record: dict, run_dir: Path) -> None:
        """Summary from ``record`` (already written to run_dir), the run's files as an artifact, finish."""
        import wandb

        run_dir = Path(run_dir)
        try:
            logged = max(self.last_epoch, record.get("resumed_from_epoch") or 0)
            for row in read_metric_rows(run_dir):  # rows this launcher did not see (rank 0 on another host)
                if row.get("epoch", 0) > logged:
                    self.log_epoch(row)
            self.run.summary.update(wandb_summary(record))
            if (
                record.get("best_val") is not None
            ):  # a resumed attempt's rows start after its checkpoint: the record knows all
                self.run.summary["val"] = {"max": record["best_val"]}
            artifact = wandb.Artifact(f"run-{self.run.id}", type=ARTIFACT_TYPE, metadata={"status": record["status"]})
            for name in (RECORD_FILE, CONFIG_FILE, METRICS_FILE):
                if (run_dir / name).is_file():
                    artifact.add_file(str(run_dir / name), name=name)
            self.run.log_artifact(artifact)
            if record["status"] != "ok":  # told apart from the attempt that reruns it under the same name
                self.run.tags = (*self.run.tags, FAILED_TAG)
                self.run.name = f"{self.run.name}-{FAILED_TAG}"
        finally:
            self.run.finish(exit_code=0 if record["status"] == "ok" else 1)


def make_logger(cfg: DictConfig, run_dir: Path, resume: bool = False):
    if cfg.logger.name == "wandb":
        return WandbLogger(cfg, run_dir, resume)
    return NullLogger()


def close_logger(logger: NullLogger, record: dict, run_dir: Path) -> None:
    """``logger.close``; a W&B failure here is a warning: record.json is already complete."""
    try:
        logger.close(record, run_dir)
    except Exception as exc:  # noqa: BLE001
        print(
            f"gnnq: warning: W&B could not finish the run of {run_dir}: {type(exc).__name__}: {exc}",
            file=sys.stderr,
            flush=True,
        )
