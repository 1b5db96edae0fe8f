"""Weights & Biases logging from rank 0 (offline by default; no account needed)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf


class NullLogger:
    def log_epoch(self, row: dict) -> None:
        pass

    def log_summary(self, summary: dict) -> None:
        pass

    def finish(self, exit_code: int = 0) -> None:
        pass


def wandb_group(cfg: DictConfig) -> str:
    """``logger.group`` (set for every point of a multirun), else dataset-model-parallel-quantizer."""
    if cfg.logger.group:
        return cfg.logger.group
    return f"{cfg.dataset.name}-{cfg.model.name}-{cfg.parallel.name}-{cfg.quantizer.name}"


RUN_ID_FILE = "wandb_run_id"  # under the run's .gnnq/: a resumed run logs to the same W&B run


def wandb_run_id(run_dir: Path, resume: bool) -> str:
    """The run's W&B id: new for a new run, the one it started with when it resumes."""
    import secrets

    from gnnq.track.files import write_text_atomic
    from gnnq.track.record import INTERNAL_DIR

    path = Path(run_dir) / INTERNAL_DIR / RUN_ID_FILE
    if resume and path.is_file():
        return path.read_text().strip()
    run_id = secrets.token_hex(6)  # W&B ids: letters and digits, unique within the project
    write_text_atomic(path, run_id)
    return run_id


class WandbLogger(NullLogger):
    def __init__(self, cfg: DictConfig, run_dir: Path, resume: bool = False):
        import wandb

        self._wandb = wandb
        choices = {
            "dataset": cfg.dataset.name,
            "model": cfg.model.name,
            "partitioner": cfg.partitioner.name,
            "quantizer": cfg.quantizer.name,
            "parallel": cfg.parallel.name,
        }
        world = cfg.cluster.nproc * cfg.cluster.hosts
        self.run = wandb.init(
            project=cfg.logger.project,
            entity=cfg.logger.entity,
            mode=cfg.logger.mode,
            dir=str(run_dir),
            id=wandb_run_id(run_dir, resume),
            resume="allow" if resume else None,
            name=Path(run_dir).name,
            group=wandb_group(cfg),
            tags=[f"{k}:{v}" for k, v in choices.items()] + [f"ranks:{world}"] + list(cfg.logger.tags),
            config=OmegaConf.to_container(cfg, resolve=True),
        )

    def log_epoch(self, row: dict) -> None:
        self.run.log({k: v for k, v in row.items() if v is not None and k != "epoch"}, step=row["epoch"])

    def log_summary(self, summary: dict) -> None:
        for key, value in summary.items():
            if isinstance(value, (int, float, str)) or value is None:
                self.run.summary[key] = value

    def finish(self, exit_code: int = 0) -> None:
        self.run.finish(exit_code=exit_code)


def make_logger(cfg: DictConfig, run_dir: Path, resume: bool = False):
    if cfg.logger.name == "wandb":
        return WandbLogger(cfg, run_dir, resume)
    return NullLogger()
