"""What a sweep will do and what it did: the dry-run listing and the end-of-sweep summary.

The dry run (``gnnq -m ... --dry-run``, also ``-m --cfg job``) lists every point with the overrides that tell it
apart and an estimated time: the median ``wall_time_s`` of the ok runs under the runs root whose config
equals the point's (up to ``trainer.seed``).
"""

from __future__ import annotations

import json
import shlex
import statistics
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnq.config.compose import SWEEPS_DIR
from gnnq.contract import RECORD_FILE
from gnnq.launch.job_names import override_key, shared_keys
from gnnq.launch.sweep_state import flat_config

SEED_FREE = frozenset({"trainer.seed"})  # a seed does not change how long a run takes


def earlier_times(runs_root: Path) -> dict[frozenset, list[float]]:
    """Config (flat, without the seed) -> wall times of the ok runs below ``runs_root``."""
    times: dict[frozenset, list[float]] = {}
    for path in sorted(Path(runs_root).rglob(RECORD_FILE)) if Path(runs_root).is_dir() else []:
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if (
            rec.get("status") == "ok"
            and isinstance(rec.get("wall_time_s"), (int, float))
            and isinstance(rec.get("config"), dict)
        ):
            times.setdefault(frozenset(flat_config(rec["config"], SEED_FREE).items()), []).append(
                float(rec["wall_time_s"])
            )
    return times


def run_config(cfg: DictConfig) -> dict:
    """What a run's record holds as its config: the composed config without Hydra's node (a sweep file's has one)."""
    return {
        k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
        for k, v in cfg.items()
        if k != "hydra"
    }


def fmt_duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


def dry_run_lines(points: list[tuple[list[str], DictConfig]]) -> list[str]:
    """The listing of a sweep's points: count, shared overrides, each point's own overrides and estimated time."""
    runs_root = Path(str(points[0][1].runs_root))
    known = earlier_times(runs_root)
    shared = set(shared_keys([p for p, _ in points]))
    common = [o for o in points[0][0] if override_key(o) in shared]
    lines = [
        f"gnnq: dry run, nothing runs: {len(points)} point(s)" + (f", each with {' '.join(common)}" if common else "")
    ]
    total, unknown = 0.0, 0
    width = len(str(len(points)))
    for i, (point, cfg) in enumerate(points):
        own = " ".join(o for o in point if override_key(o) not in shared) or "(no overrides)"
        walls = known.get(frozenset(flat_config(run_config(cfg), SEED_FREE).items()))
        if walls:
            estimate = statistics.median(walls)
            total += estimate
            when = f"~{fmt_duration(estimate)} (median of {len(walls)} earlier run(s))"
        else:
            unknown += 1
            when = "time unknown (no earlier ok run of this config)"
        lines.append(f"  #{i:<{width}}  {own}  {when}")
    known_n = len(points) - unknown
    estimate = (
        f"estimated time: {fmt_duration(total)} for {known_n} of {len(points)} point(s)"
        if known_n
        else "estimated time: unknown"
    )
    lines.append(
        estimate
        + (
            f"; {unknown} point(s) have no earlier run under {runs_root}"
            if unknown
            else f" (earlier runs under {runs_root})"
        )
    )
    return lines


def summary_lines(
    sweep_dir: str, runs: list[str], failed: list[str], skipped: list[str], table: str | None
) -> list[str]:
    """The end of a sweep: how many points ended ok and failed, the failed run dirs, the report command to run next."""
    ok = len(runs) - len(failed)
    done = f" ({len(skipped)} done earlier, skipped)" if skipped else ""
    lines = [f"[gnnq] sweep finished in {sweep_dir}: {ok} ok{done}, {len(failed)} failed"]
    lines += [f"[gnnq]   failed: {d}" for d in failed]
    report = [
        "gnnq-report",
        sweep_dir,
        *(["--table", table] if table else []),
        "--out",
        str(Path(sweep_dir) / "report"),
    ]
    lines.append(f"[gnnq] next: {shlex.join(report)}")
    if failed:
        lines.append(
            "[gnnq] to run the failed points again and skip the ok ones: the same command with "
            f"hydra.sweep.dir={sweep_dir}"
        )
    return lines


def table_name(config_name: str, config_dir: str | None) -> str | None:
    """The table spec beside a sweep file: its bare name when shipped with gnnq, else its path."""
    from gnnq.report.tables import SPEC_SUFFIX  # pandas: only once a sweep has ended

    if config_dir is None:
        return None
    spec = Path(config_dir) / f"{config_name}{SPEC_SUFFIX}"
    if not spec.is_file():
        return None
    return config_name if spec.resolve() == (SWEEPS_DIR / spec.name).resolve() else str(spec.resolve())
