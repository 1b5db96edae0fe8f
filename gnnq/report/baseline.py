"""Each configuration against its baseline, the default columns of a leaderboard (no ``--table`` spec needed):
throughput speedup, time-to-target speedup, and halo and all-traffic byte ratios.

The baseline of a configuration is Vanilla (``parallel=sync``, ``quantizer=fp32``) on the same dataset with the same
settings otherwise (model, ranks, hosts, epochs; the method's own groups aside); where no such run exists, the
dataset's only Vanilla configuration; else none (the columns stay empty)."""

from __future__ import annotations

from gnnq.report.aggregate import Group
from gnnq.report.plots import METHOD_GROUPS, _config, _is_baseline, _settings


def _is_method(key: str) -> bool:
    return key.split(".")[0] in METHOD_GROUPS


def baseline_of(g: Group, groups: list[Group]) -> Group | None:
    """The Vanilla configuration ``g`` is compared with (itself where it is Vanilla)."""
    vanilla = [b for b in groups if b.dataset == g.dataset and _is_baseline(_config(b))]
    mine = _settings(_config(g), _is_method)
    same = [b for b in vanilla if _settings(_config(b), _is_method) == mine]
    if same:
        return same[0]
    return vanilla[0] if len(vanilla) == 1 else None


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def comparison(g: Group, base: Group | None) -> dict[str, float | str | None]:
    """``speedup``: throughput (epochs/s with overheads) over the baseline's; ``tta_speedup``: the baseline's time to
    target over this one's; ``halo_vs_base`` and ``bytes_vs_base``: halo bytes and all bytes (halo, gradient
    all-reduce, evaluation, setup and profiling per epoch) over the baseline's; ``baseline``: its name."""
    if base is None:
        return {"baseline": None, "speedup": None, "tta_speedup": None, "halo_vs_base": None, "bytes_vs_base": None}
    s, b = g.stats, base.stats
    tta, tta_base = (g.time_to_target and g.time_to_target.mean), (base.time_to_target and base.time_to_target.mean)
    return {
        "baseline": base.label or base.config,
        "speedup": _ratio(s["throughput"].mean, b["throughput"].mean),
        "tta_speedup": _ratio(tta_base, tta),
        "halo_vs_base": _ratio(s["comm_bytes_per_epoch"].mean, b["comm_bytes_per_epoch"].mean),
        "bytes_vs_base": _ratio(s["all_bytes_per_epoch"].mean, b["all_bytes_per_epoch"].mean),
    }
