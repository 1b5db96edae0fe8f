"""The "place and start the ranks" step: the run's cluster class starts them (gnnq.launch.clusters) while the
progress line follows rank 0's epoch rows."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from omegaconf import DictConfig

from gnnq.launch.clusters import cluster_of
from gnnq.launch.console import say
from gnnq.track.progress import ProgressLine


def start_ranks(cfg: DictConfig, run_dir: Path, parts_dir: Path, on_row: Callable[[dict], None]) -> dict:
    """Start the ranks the run's cluster class starts and follow them; every epoch row rank 0 reports goes to the
    progress line and ``on_row``."""
    progress = ProgressLine(cfg.trainer.epochs)

    def follow(row: dict) -> None:
        progress.update(row)
        on_row(row)

    try:
        return cluster_of(cfg).start(run_dir, parts_dir, say, follow)
    finally:
        progress.close()
