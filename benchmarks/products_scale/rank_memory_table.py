"""Per-rank estimate (gnnq.launch.resources as it is now) beside the measured peak, for finished runs.

    python -m benchmarks.products_scale.rank_memory_table RUN_DIR_OR_RECORD [...]

One row per run: nodes, model, in-edges, inner and halo nodes of its largest part, the estimate the code now gives
for that part (datasets without ``dataset.feature_dim``: the estimate the run recorded), the measured peaks
(``summary.peak_memory_mib_per_rank``) and max measured / estimate.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omegaconf import OmegaConf

from gnnq.launch.resources import per_rank_estimates, resource_plan


def row(path: Path) -> str:
    record = json.loads((path / "record.json" if path.is_dir() else path).read_text())
    cfg = OmegaConf.create(record["config"])
    meta = record["partition"]
    features = cfg.dataset.get("feature_dim")  # synthetic graphs; others: the estimate the run recorded
    estimates = meta["memory_estimate_mib_per_rank"]
    if features:
        estimates = per_rank_estimates(resource_plan(cfg), meta, features)
    peaks = record["summary"]["peak_memory_mib_per_rank"]
    m = cfg.model
    return (
        f"| {meta['num_nodes']:,} | {m.name} {m.layers} x {m.hidden} | {meta['num_edges']:,} | "
        f"{max(meta['inner_nodes']):,} | "
        f"{max(meta['halo_nodes']):,} | {max(estimates):,.0f} | {min(peaks):,.0f}-{max(peaks):,.0f} | "
        f"{max(peaks) / max(estimates):.2f} |"
    )


def main() -> None:
    print("| nodes | model | edges | inner | halo | estimate (MiB) | measured (MiB) | measured / estimate |")
    print("|---|---|---|---|---|---|---|---|")
    for arg in sys.argv[1:]:
        path = Path(arg)
        status = json.loads((path / "record.json" if path.is_dir() else path).read_text()).get("status")
        print(row(path) if status == "ok" else f"<!-- {arg}: {status}, no peaks -->")


if __name__ == "__main__":
    main()
