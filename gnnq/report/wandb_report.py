"""The report's tables logged to a W&B run of their own (offline by default), so users who sync to
W&B find the comparison beside the training runs: in their W&B group, with the report's settings as
its config and a table linking every W&B run it was built from."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from omegaconf import OmegaConf

from gnnq.contract import INTERNAL_DIR
from gnnq.report.frames import json_ready


def source_run(run_dir: Path, record: dict) -> dict:
    """Where a training run's W&B run is: ``entity/project/id`` (``project/id`` without an entity), its group
    and URL (with an entity); run path None for runs logged without W&B."""
    from gnnq.track.wandb_logger import RUN_ID_FILE, wandb_group  # torch (gnnq.track.files): only for W&B links

    logger = (record.get("config") or {}).get("logger") or {}
    id_file = Path(run_dir) / INTERNAL_DIR / RUN_ID_FILE
    run_id = id_file.read_text().strip() if id_file.is_file() else None
    entity, project = logger.get("entity"), logger.get("project")
    path = "/".join(p for p in (entity, project, run_id) if p) if run_id else None
    try:
        group = wandb_group(OmegaConf.create(record["config"]))
    except Exception:  # noqa: BLE001 - an older record's config without logger keys: no group
        group = None
    url = f"https://wandb.ai/{entity}/{project}/runs/{run_id}" if run_id and entity and project else None
    return {
        "run_dir": str(run_dir),
        "status": record.get("status"),
        "wandb_run": path,
        "wandb_group": group,
        "url": url,
    }


def report_group(sources: list[dict]) -> str:
    """The W&B group of the runs when they share one (the report sits beside them), else ``gnnq-report``."""
    groups = {s["wandb_group"] for s in sources if s["wandb_group"]}
    return groups.pop() if len(groups) == 1 else "gnnq-report"


def log_report(
    out: Path,
    tables: dict[str, pd.DataFrame],
    images: list[Path],
    settings: dict,
    sources: list[dict],
    project: str = "gnnq",
    mode: str = "offline",
) -> Path:
    """One W&B run (job type "report") holding every table as a ``wandb.Table``, the PNG plots and a table of
    the source runs; ``settings`` (how the report was made) and the source runs' W&B paths are its config.

    ``tables``: name -> the report's numeric frame (numbers stay numbers, missing values are null).
    Returns the run's local directory.
    """
    import wandb

    config = {**settings, "source_runs": [s["wandb_run"] or s["run_dir"] for s in sources]}
    run = wandb.init(
        project=project,
        mode=mode,
        dir=str(out),
        job_type="report",
        group=report_group(sources),
        config=config,
        name=f"gnnq-report-{time.strftime('%Y%m%d-%H%M%S')}",
        tags=["gnnq-report"],
    )
    try:
        frames = {
            **tables,
            "sources": pd.DataFrame(sources, columns=["run_dir", "status", "wandb_run", "wandb_group", "url"]),
        }
        payload = {
            name: wandb.Table(columns=[str(c) for c in frame.columns], data=json_ready(frame).values.tolist())
            for name, frame in frames.items()
        }
        payload.update({f"plots/{p.stem}": wandb.Image(str(p)) for p in images if p.suffix == ".png"})
        run.log(payload)
        return Path(run.dir).parent
    finally:
        run.finish()
