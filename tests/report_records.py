"""Synthetic run directories for the report tests: real composed configs, a metrics.jsonl curve and a record.json of
the shape a run writes, with numbers the test chooses (so the expected report is known exactly)."""

from __future__ import annotations

import json
import statistics
from functools import lru_cache
from pathlib import Path

from omegaconf import OmegaConf

from gnnq.config.compose import compose_config


@lru_cache(maxsize=None)
def _config(overrides: tuple[str, ...]) -> str:
    return json.dumps(OmegaConf.to_container(compose_config(list(overrides)), resolve=True))


def write_run(
    root: Path,
    overrides: list[str],
    seed: int,
    vals: list[float],
    epoch_s: list[float] | float = 1.0,
    overhead_s: float = 0.0,
    halo: int = 1_000_000,
    grad: int = 500_000,
    evaluation: int = 200_000,
    setup: int = 0,
    overhead_bytes: int = 0,
    test: float | None = None,
    quantization: dict | None = None,
) -> Path:
    """One run of ``overrides`` at ``seed`` whose validation metric is ``vals`` at epochs 1..n; the overhead is
    charged to epoch 1 (as AdaQP's startup profile is)."""
    config = json.loads(_config(tuple(overrides)))
    config["trainer"]["seed"] = seed
    times = [epoch_s] * len(vals) if isinstance(epoch_s, (int, float)) else list(epoch_s)
    run = root / f"{'_'.join(o.replace('=', '-') for o in overrides) or 'vanilla'}_s{seed}"
    run.mkdir(parents=True)
    rows = [
        {"epoch": i + 1, "epoch_time_s": t, "overhead_time_s": overhead_s if i == 0 else 0.0, "val": v}
        for i, (t, v) in enumerate(zip(times, vals))
    ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    training = sum(times) + overhead_s
    summary = {
        "metric": "accuracy",
        "epochs": len(vals),
        "training_time_s": training,
        "overhead_time_s": overhead_s,
        "throughput_epochs_per_s": len(vals) / training,
        "grad_sync_bytes_per_epoch": grad,
        "eval_comm_bytes_per_epoch": evaluation,
        "setup_comm_bytes": setup,
        "overhead_bytes": overhead_bytes,
        "quantization": quantization,
    }
    record = {
        "status": "ok",
        "config": config,
        "best_val": max(vals),
        "test": max(vals) if test is None else test,
        "epoch_time_s": statistics.median(times),
        "comm_time_s": 0.1,
        "comm_bytes_per_epoch": halo,
        "world_size": 2,
        "summary": summary,
        "machine": {"cpu": "Test CPU", "cores": 2},
    }
    (run / "record.json").write_text(json.dumps(record))
    return run
