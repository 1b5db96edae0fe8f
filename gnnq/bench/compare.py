"""Side-by-side statistics of a benchmark's runs: per sweep point over its repeats, and ratios
against the baseline method measured in the same invocation (paired by repeat)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from gnnq.report.curves import read_curve, time_to_target
from gnnq.report.fields import emulated_cores


@dataclass
class Point:
    """One sweep point: its method (the baseline axis's value), its setting (the other axes) and its runs."""

    index: int
    overrides: list[str]
    method: str
    setting: tuple[tuple[str, str], ...]
    runs: dict[int, dict] = field(default_factory=dict)  # repeat -> record (with run_dir)

    def ok_runs(self) -> dict[int, dict]:
        return {r: rec for r, rec in self.runs.items() if rec.get("status") == "ok"}

    def failed_runs(self) -> dict[int, dict]:
        return {r: rec for r, rec in self.runs.items() if rec.get("status") != "ok"}


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _spread(values: list[float]) -> tuple[float | None, float | None]:
    return (min(values), max(values)) if values else (None, None)


def _std(values: list[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else (0.0 if values else None)


def summary_value(rec: dict, key: str, default=None):
    """A value of the run summary (records keep the full summary under "summary")."""
    value = (rec.get("summary") or {}).get(key)
    return default if value is None else value


def halo_messages(rec: dict) -> bool:
    """Whether the run's counted messages are halo rows (its parallel choice's registry line: ``messages``)."""
    from gnnq.config.registry import PARALLEL

    name = ((rec.get("config") or {}).get("parallel") or {}).get("name")
    return name not in PARALLEL or PARALLEL.choice(name).messages == "halo"


def speedup_bounds(
    base_ok: dict[int, dict], ok: dict[int, dict], byte_ratio: float | None
) -> tuple[float | None, float | None]:
    """The speedups a method could reach over the baseline: (without overlap, with perfect overlap).

    From medians over repeats: the baseline's epoch time T, its exposed halo communication M and
    other exposed communication G (the gradient all-reduce, which no codec shrinks), its compute
    time C = T - M - G; the method's byte ratio r and codec time K per epoch: without overlap
    T / (C + G + K + r·M), with perfect overlap T / max(C + G + K, r·M).
    """
    if not base_ok or not ok or byte_ratio is None:
        return None, None
    t = _median([rec["epoch_time_s"] for rec in base_ok.values()])
    m = _median([summary_value(rec, "halo_comm_time_s", rec["comm_time_s"]) for rec in base_ok.values()])
    rest = t - m  # C + G
    k = _median([summary_value(rec, "codec_time_s", 0.0) for rec in ok.values()])
    no_overlap = rest + k + byte_ratio * m
    overlap = max(rest + k, byte_ratio * m)
    return (t / no_overlap if no_overlap > 0 else None), (t / overlap if overlap > 0 else None)


def compare(
    points: list[Point],
    baseline: str,
    target: float | None,
    target_drop: float,
    pairs: dict[str, str] | None = None,
) -> list[dict]:
    """One row per point, grouped by setting: medians and spreads over repeats, speedups against the baseline point of
    the same setting.

    ``pairs`` maps a method to its own reference method (``gnnq-bench --pair``); every other method
    is compared against ``baseline``. The validation target of a point is ``target`` if given, else
    its reference's median best validation value minus ``target_drop``. Speedups are paired: repeat
    r of a point against repeat r of its reference (run in the same round), then the median and
    range of those ratios.
    """
    pairs = pairs or {}
    point_of = {(p.setting, p.method): p for p in points}
    rows = []
    for p in _in_setting_order(points):
        reference = pairs.get(p.method, baseline)
        base = point_of.get((p.setting, reference))
        base_ok = base.ok_runs() if base else {}
        rows.append(_compare_point(p, reference, base_ok, _validation_goal(target, target_drop, base_ok)))
    return rows


def _in_setting_order(points: list[Point]) -> list[Point]:
    """The points grouped by setting, then by method, each in order of first appearance."""
    settings = list(dict.fromkeys(p.setting for p in points))
    methods = list(dict.fromkeys(p.method for p in points))
    return sorted(points, key=lambda p: (settings.index(p.setting), methods.index(p.method)))


def _validation_goal(target: float | None, target_drop: float, base_ok: dict[int, dict]) -> float | None:
    """The validation value to reach: ``target`` if given, else the reference's median best value minus the drop."""
    if target is None and base_ok:
        return _median([rec["best_val"] for rec in base_ok.values()]) - target_drop
    return target


def _times_to_target(runs: dict[int, dict], goal: float | None) -> dict[int, float | None]:
    """Per repeat, the seconds each run took to reach ``goal`` (None without a goal or if never reached)."""
    if goal is None:
        return dict.fromkeys(runs)
    return {r: time_to_target(read_curve(rec["run_dir"]), goal) for r, rec in runs.items()}


def _compare_point(p: Point, reference: str, base_ok: dict[int, dict], goal: float | None) -> dict:
    """The comparison row of one point against its reference's successful runs."""
    ok = p.ok_runs()
    wall = {r: summary_value(rec, "throughput_epochs_per_s") for r, rec in ok.items()}
    ttt = _times_to_target(ok, goal)
    ratios = _paired_ratios(ok, base_ok, wall, ttt, goal)
    row = {
        **_identity_fields(p, reference, ok),
        **_epoch_fields(ok),
        **_target_fields(goal, ttt),
        **_test_fields(ok, base_ok),
        **{key: ratios[key] for key in ("speedup", "speedup_min", "speedup_max", "time_to_target_speedup")},
        **_cost_fields(ok, wall),
        "wall_speedup": ratios["wall_speedup"],
        "bytes_vs_baseline": _bytes_ratio(ok, base_ok),
    }
    # the bounds are of halo rows' bytes and the reference's halo time: both sides must move halo rows
    row["bound_applies"] = all(halo_messages(rec) for rec in (*ok.values(), *base_ok.values()))
    row["bound_no_overlap"], row["bound_overlap"] = (
        speedup_bounds(base_ok, ok, row["bytes_vs_baseline"]) if row["bound_applies"] else (None, None)
    )
    row["bound_fraction"] = row["speedup"] / row["bound_overlap"] if row["speedup"] and row["bound_overlap"] else None
    return row


def _identity_fields(p: Point, reference: str, ok: dict[int, dict]) -> dict:
    """Which point this is, what it is compared against and how many of its runs succeeded or failed."""
    return {
        "point": p.index,
        "method": p.method,
        "baseline": reference,
        "setting": dict(p.setting),
        "overrides": p.overrides,
        "runs": len(ok),
        "failed": [
            {"repeat": r, "error": rec.get("error"), "run_dir": rec.get("run_dir")}
            for r, rec in p.failed_runs().items()
        ],
    }


def _epoch_fields(ok: dict[int, dict]) -> dict:
    """Epoch time (median and range over repeats), communication share and bytes per epoch."""
    epoch = [rec["epoch_time_s"] for rec in ok.values()]
    lo, hi = _spread(epoch)
    return {
        "epoch_time_s": _median(epoch),
        "epoch_time_min_s": lo,
        "epoch_time_max_s": hi,
        "comm_share": _median(
            [rec["comm_time_s"] / rec["epoch_time_s"] for rec in ok.values() if rec.get("epoch_time_s")]
        ),
        "comm_bytes_per_epoch": _median([rec["comm_bytes_per_epoch"] for rec in ok.values()]),
    }


def _target_fields(goal: float | None, ttt: dict[int, float | None]) -> dict:
    """The validation target and how many repeats reached it (the median time only if all did)."""
    reached = [t for t in ttt.values() if t is not None]
    return {
        "target_val": goal,
        "time_to_target_s": _median(reached) if len(reached) == len(ttt) else None,
        "target_reached": f"{len(reached)}/{len(ttt)}",
    }


def _test_fields(ok: dict[int, dict], base_ok: dict[int, dict]) -> dict:
    """Test accuracy: mean and deviation over repeats, and the difference to the reference's mean."""
    tests = [rec["test"] for rec in ok.values() if rec.get("test") is not None]
    base_tests = [rec["test"] for rec in base_ok.values() if rec.get("test") is not None]
    return {
        "test_mean": statistics.fmean(tests) if tests else None,
        "test_std": _std(tests),
        "test_vs_baseline": statistics.fmean(tests) - statistics.fmean(base_tests) if tests and base_tests else None,
    }


def _paired_ratios(
    ok: dict[int, dict],
    base_ok: dict[int, dict],
    wall: dict[int, float | None],
    ttt: dict[int, float | None],
    goal: float | None,
) -> dict:
    """Speedups over the reference, repeat r against repeat r: epoch time, time to target and wall throughput.

    Time-to-target and wall speedups are given only when every paired repeat has one."""
    epoch = {r: rec["epoch_time_s"] for r, rec in ok.items()}
    base_epoch = {r: rec["epoch_time_s"] for r, rec in base_ok.items()}
    base_wall = {r: summary_value(rec, "throughput_epochs_per_s") for r, rec in base_ok.items()}
    base_ttt = _times_to_target(base_ok, goal) if goal is not None else {}
    paired = sorted(set(epoch) & set(base_epoch))
    speedups = [base_epoch[r] / epoch[r] for r in paired if epoch[r]]
    wall_speedups = [wall[r] / base_wall[r] for r in paired if wall.get(r) and base_wall.get(r)]
    ttt_pairs = [base_ttt[r] / ttt[r] for r in paired if ttt.get(r) and base_ttt.get(r)]
    s_lo, s_hi = _spread(speedups)
    return {
        "speedup": _median(speedups),
        "speedup_min": s_lo,
        "speedup_max": s_hi,
        "time_to_target_speedup": _median(ttt_pairs) if ttt_pairs and len(ttt_pairs) == len(paired) else None,
        "wall_speedup": _median(wall_speedups) if wall_speedups and len(wall_speedups) == len(paired) else None,
    }


def _cost_fields(ok: dict[int, dict], wall: dict[int, float | None]) -> dict:
    """Codec and overhead time, wall throughput and the emulated cores the runs had (medians over repeats)."""
    return {
        "codec_time_s": _median([summary_value(rec, "codec_time_s", 0.0) for rec in ok.values()]),
        "overhead_time_s": _median([summary_value(rec, "overhead_time_s", 0.0) for rec in ok.values()]),
        "throughput_epochs_per_s": _median([w for w in wall.values() if w is not None]),
        "cores_per_host": _median([c["cores_per_host"] for rec in ok.values() if (c := emulated_cores(rec))]),
        "oversubscribed": any((emulated_cores(rec) or {}).get("oversubscribed") for rec in ok.values()),
    }


def _bytes_ratio(ok: dict[int, dict], base_ok: dict[int, dict]) -> float | None:
    """Median bytes per epoch over the reference's median (None when either side has no successful run or a
    reference run sent no bytes)."""
    if not (ok and base_ok and all(rec["comm_bytes_per_epoch"] for rec in base_ok.values())):
        return None
    return _median([rec["comm_bytes_per_epoch"] for rec in ok.values()]) / _median(
        [rec["comm_bytes_per_epoch"] for rec in base_ok.values()]
    )
