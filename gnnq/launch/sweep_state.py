"""A sweep point's earlier attempt in its job directory: skip it when it finished, run it again when it failed.

Rerunning a multirun with the same ``hydra.sweep.dir`` resumes the sweep: a point whose directory holds an
``ok`` record of the same config is skipped, a failed one is run again (its record, config, metrics and logs
and W&B run are kept beside as ``*.failed-<n>``), and ``overwrite=true`` runs every point again.
"""

from __future__ import annotations

import json
from pathlib import Path

from gnnq.contract import CONFIG_FILE, METRICS_FILE, RECORD_FILE
from gnnq.launch.run_dir import PlaceError, clear_earlier_attempt
from gnnq.report.overrides import IGNORED_GROUPS, IGNORED_KEYS  # keys that do not change what a run computes
from gnnq.track.record import set_aside_attempts
from gnnq.track.wandb_logger import WANDB_DIR


def flat_config(config: dict, leave_out: frozenset[str] = frozenset(), prefix: str = "") -> dict[str, str]:
    """Dotted key -> JSON of its value, for the keys that change what a run computes (and not ``leave_out``)."""
    out = {}
    for k, v in config.items():
        key = f"{prefix}{k}"
        if key in IGNORED_KEYS or key in IGNORED_GROUPS or key in leave_out:
            continue
        out.update(
            flat_config(v, leave_out, key + ".") if isinstance(v, dict) else {key: json.dumps(v, sort_keys=True)}
        )
    return out


def differences(old: dict, new: dict) -> list[str]:
    """``key: old -> new`` for every computed key that differs."""
    a, b = flat_config(old), flat_config(new)
    return [
        f"{k}: {a.get(k, '(none)')} -> {b.get(k, '(none)')}"
        for k in sorted(a.keys() | b.keys())
        if a.get(k) != b.get(k)
    ]


def read_record(run_dir: Path) -> dict | None:
    try:
        return json.loads((Path(run_dir) / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return None


def earlier_attempt(run_dir: Path, config: dict, point: str) -> tuple[str, str]:
    """What to do with a sweep point whose directory may hold an earlier attempt: ("run" | "skip", the line saying so).

    PlaceError when it holds a finished run of another config (the sweep dir belongs to another sweep)."""
    record = read_record(run_dir)
    if record is None:
        if not any((Path(run_dir) / name).exists() for name in (CONFIG_FILE, METRICS_FILE)):
            return "run", ""
        n = set_aside(run_dir)
        return (
            "run",
            f"{point}: the earlier attempt left no record (killed?); running it again (its files kept as *.failed-{n})",
        )
    if record.get("status") == "ok":
        changed = differences(record.get("config") or {}, config)
        if changed:
            raise PlaceError(
                f"hydra.sweep.dir: {run_dir} holds a finished run of another config ({'; '.join(changed[:3])}); "
                "choose a new hydra.sweep.dir, or run every point again with overwrite=true"
            )
        return "skip", f"{point}: done in an earlier attempt (record ok), skipped"
    n = set_aside(run_dir)
    return (
        "run",
        f"{point}: the earlier attempt failed ({record.get('error')}); running it again (its files kept as "
        f"*.failed-{n})",
    )


def set_aside(run_dir: Path) -> int:
    """Rename the earlier attempt's record, config, metrics, logs and W&B run to ``*.failed-<n>`` (n: one more than
    any earlier set-aside attempt's); remove its checkpoints and hand-offs."""
    run_dir = Path(run_dir)
    n = max(set_aside_attempts(run_dir), default=0) + 1
    for name in (RECORD_FILE, CONFIG_FILE, METRICS_FILE, "logs", WANDB_DIR):
        path = run_dir / name
        if path.exists():
            stem, dot, ext = name.partition(".")
            path.rename(run_dir / (f"{stem}.failed-{n}{dot}{ext}"))
    clear_earlier_attempt(run_dir, checkpoints=True)
    return n
