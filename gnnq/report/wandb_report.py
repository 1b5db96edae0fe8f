"""The report's tables logged to a W&B run of their own (offline by default), so users who sync to
W&B find the comparison beside the training runs (which are tagged by their config choices)."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from gnnq.report.frames import json_ready


def log_report(out: Path, tables: dict[str, pd.DataFrame], images: list[Path], project: str = "gnnq",
               mode: str = "offline") -> Path:  # fmt: skip
    """One W&B run (job type "report") holding every table as a ``wandb.Table`` and the PNG plots.

    ``tables``: name -> the report's numeric frame (numbers stay numbers, missing values are null).
    Returns the run's local directory.
    """
    import wandb

    run = wandb.init(project=project, mode=mode, dir=str(out), job_type="report",
                     name=f"gnnq-report-{time.strftime('%Y%m%d-%H%M%S')}", tags=["gnnq-report"])  # fmt: skip
    try:
        payload = {name: wandb.Table(columns=[str(c) for c in frame.columns], data=json_ready(frame).values.tolist())
                   for name, frame in tables.items()}  # fmt: skip
        payload.update({f"plots/{p.stem}": wandb.Image(str(p)) for p in images if p.suffix == ".png"})
        run.log(payload)
        return Path(run.dir).parent
    finally:
        run.finish()
