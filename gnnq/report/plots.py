"""Report plots (PNG and SVG, matplotlib without a display): accuracy vs throughput with the Pareto
front marked, bytes per epoch by configuration and kind (halo, gradient all-reduce, evaluation, setup and
profiling), training curves (validation vs time), and, where
runs on emulated hosts differ in link bandwidth or number of hosts, throughput speedup over Vanilla
against that setting."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gnnq.contract import LINK_PRESETS_MBIT
from gnnq.report import fields
from gnnq.report.aggregate import Group, lookup
from gnnq.report.curves import read_curve
from gnnq.report.output import save_figure
from gnnq.report.overrides import IGNORED_GROUPS, IGNORED_KEYS
from gnnq.report.progress import steps


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: Path, stem: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    for p in paths:
        save_figure(fig, p, dpi=120, bbox_inches="tight")  # nothing cut: long tick labels, the legend beside
    return paths


def labels(groups: list[Group]) -> list[str]:
    """Each configuration's name (``Group.label``, set by gnnq-report from the table spec, preset or method)."""
    return [g.label or g.config for g in groups]


LEGEND = {"fontsize": 9, "loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0, "frameon": False}


def _legend(ax) -> None:
    """Beside the axes, at a size readable in the PNG as it is."""
    ax.legend(**LEGEND)


def metric_name(groups: list[Group]) -> str:
    """The metric the runs' test and validation values are in (``accuracy / micro-F1`` where they differ)."""
    names = dict.fromkeys(fields.metric_name(rec) for g in groups for _, rec in g.runs)
    return " / ".join(names) or "metric"


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats in both coordinates (higher is better in both)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 >= x and y2 >= y) and (x2 > x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def _spread(g: Group, metric: str, scale: float = 1.0) -> float | None:
    std = g.stats[metric].std
    return None if std is None else std * scale


def plot_accuracy_vs_throughput(groups: list[Group], out: Path, dataset: str) -> list[Path]:
    """Mean test metric against mean wall-clock throughput, error bars one std over seeds both ways."""
    plt = _pyplot()
    mine = [g for g in groups if g.stats["test"].mean is not None and g.stats["throughput"].mean]
    points = [(g.stats["throughput"].mean, g.stats["test"].mean) for g in mine]
    fig, ax = plt.subplots(figsize=(10, 5))
    for (x, y), g, label in zip(points, mine, labels(mine)):
        mark = "" if g.throughput_measured else " *"
        ax.errorbar(
            x, y, xerr=_spread(g, "throughput"), yerr=_spread(g, "test"), fmt="o", capsize=3, label=label + mark
        )
    front = pareto_front(points)
    if front:
        ax.plot([points[i][0] for i in front], [points[i][1] for i in front], "k--", linewidth=1, label="Pareto front")
    ax.set(xlabel="throughput (training epochs / s, overheads included)", ylabel=f"test {metric_name(mine)}")
    ax.set_title(f"{dataset}: accuracy vs throughput (mean ± std over seeds)", fontsize=11)
    if any(not g.throughput_measured for g in mine):
        fig.text(0.01, 0.01, "* 1 / epoch time: the record has no wall-clock throughput", fontsize=8)
    ax.grid(alpha=0.3)
    _legend(ax)
    fig.tight_layout()
    paths = _save(fig, out, f"accuracy_vs_throughput-{dataset}")
    plt.close(fig)
    return paths


def traffic_segments(g: Group) -> dict[str, float]:
    """A configuration's mean bytes per training epoch by kind (``fields.TRAFFIC_KINDS``), the bytes moved once
    (setup, profiles) spread over its epochs; a kind its records do not count is 0."""
    s = g.stats
    mean = {m: s[m].mean for m in ("comm_bytes_per_epoch", "grad_sync_bytes_per_epoch", "eval_bytes_per_epoch")}
    per_epoch = {label: mean.get(metric) or 0.0 for metric, label, _ in fields.TRAFFIC_KINDS if metric in mean}
    once = (s["all_bytes_per_epoch"].mean or 0.0) - sum(per_epoch.values()) if s["all_bytes_per_epoch"].mean else 0.0
    return per_epoch | {fields.TRAFFIC_KINDS[-1][1]: max(0.0, once)}


def plot_bytes(groups: list[Group], out: Path, dataset: str) -> list[Path]:
    """Every byte a configuration moves per training epoch, stacked by kind: halo messages, the gradient
    all-reduce, evaluation, and the setup and profiling traffic spread over the run's epochs."""
    plt = _pyplot()
    segments = [traffic_segments(g) for g in groups]
    kinds = [label for _, label, _ in fields.TRAFFIC_KINDS]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(groups) + 1.8))
    left = np.zeros(len(groups))
    for kind in kinds:
        mb = np.array([seg[kind] / 1e6 for seg in segments])
        ax.barh(range(len(groups)), mb, left=left, label=kind)
        left += mb
    ax.set_yticks(range(len(groups)), labels(groups), fontsize=9)
    ax.invert_yaxis()
    ax.set(xlabel="MB per training epoch (all ranks; once-per-run traffic spread over the run's epochs)")
    ax.set_title(f"{dataset}: bytes per epoch by configuration and kind", fontsize=11)
    ax.grid(alpha=0.3, axis="x")
    _legend(ax)
    fig.tight_layout()
    paths = _save(fig, out, f"bytes_per_epoch-{dataset}")
    plt.close(fig)
    return paths


Curve = list[tuple[float, float]]


def mean_curve(curves: list[Curve]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and std over seeds of the validation metric at each evaluated step every seed reached, against the mean
    training time at that step (seeds evaluate at the same epochs; their clocks differ a little)."""
    steps = min(len(c) for c in curves) if curves else 0
    if steps == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    t = np.array([[p[0] for p in c[:steps]] for c in curves])
    v = np.array([[p[1] for p in c[:steps]] for c in curves])
    return t.mean(axis=0), v.mean(axis=0), v.std(axis=0, ddof=1) if len(curves) > 1 else np.zeros(steps)


def plot_curves(
    series: list[tuple[str, list[Curve]]],
    out: Path,
    stem: str,
    title: str,
    target: float | None = None,
    ylabel: str = "validation metric",
) -> list[Path]:
    """Validation metric against training time: per (label, one curve per seed) the mean line, and a band of
    ± one std where there are several seeds."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    for label, curves in series:
        t, mean, std = mean_curve([c for c in curves if c])
        n = sum(1 for c in curves if c)
        shown = label + (f" ({n} seeds)" if n > 1 else "")
        (line,) = ax.plot(t, mean, marker="o" if len(t) <= 40 else None, markersize=3, label=shown)
        if n > 1:
            ax.fill_between(t, mean - std, mean + std, color=line.get_color(), alpha=0.2, linewidth=0)
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.3f}")
    ax.set(xlabel="training time (s, slowest rank; epochs and overheads)", ylabel=ylabel)
    ax.set_title(title, fontsize=11)
    ax.grid(alpha=0.3)
    _legend(ax)
    fig.tight_layout()
    paths = _save(fig, out, stem)
    plt.close(fig)
    return paths


def plot_training_curves(groups: list[Group], out: Path, dataset: str) -> list[Path]:
    """One line per configuration: the mean over its seeds, with a ± std band."""
    series = [(label, [read_curve(d) for d, _ in g.runs]) for g, label in zip(groups, labels(groups))]
    return plot_curves(
        series,
        out,
        f"curves-{dataset}",
        f"{dataset}: validation vs training time (mean ± std over seeds)",
        ylabel=f"validation {metric_name(groups)}",
    )


def _config(g: Group) -> dict:
    return g.runs[0][1]["config"]


def _link_gbit(config: dict) -> float | None:
    """An emulated host's link bandwidth in Gbit/s (a preset's, or bandwidth_mbit for link=custom)."""
    cluster = config.get("cluster") or {}
    if "link" not in cluster:  # only a cluster with shaped links (cluster=emulated) has one
        return None
    link = cluster.get("link")
    mbit = cluster.get("bandwidth_mbit") if link == "custom" else LINK_PRESETS_MBIT.get(link)
    return None if mbit is None else float(mbit) / 1000.0


def _hosts(config: dict) -> float | None:
    cluster = config.get("cluster") or {}
    shaped = "link" in cluster  # hosts joined by shaped links (cluster=emulated)
    return float(cluster["hosts"]) if shaped and cluster.get("hosts") is not None else None


@dataclass(frozen=True)
class SpeedupAxis:
    """A setting of emulated clusters to plot speedups against: how to read it and which overrides set it."""

    name: str  # plot stem: speedup_vs_<name>-<dataset>
    xlabel: str
    value: object  # config -> float | None (None: not an emulated run)
    keys: tuple[str, ...]  # overrides that set it (dropped from a line's identity)
    log: bool = False


SPEEDUP_AXES = (
    SpeedupAxis(
        "bandwidth",
        "link bandwidth per host (Gbit/s)",
        _link_gbit,
        ("cluster.link", "cluster.bandwidth_mbit"),
        log=True,
    ),
    SpeedupAxis("hosts", "emulated hosts", _hosts, ("cluster.hosts",)),
)
METHOD_GROUPS = ("parallel", "quantizer")  # what makes a method; everything else is its setting


def _is_baseline(config: dict) -> bool:
    """Vanilla: synchronous exchange of exact fp32 messages."""
    return lookup(config, "parallel.name") == "sync" and lookup(config, "quantizer.name") == "fp32"


def _key(override: str) -> str:
    return override.lstrip("+~").split("=", 1)[0]


def _flat(tree: dict, prefix: str = "") -> dict[str, str]:
    """Dotted key -> JSON of its value, for the keys that change what a run computes (the seed left out)."""
    out = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if key in IGNORED_KEYS or key in IGNORED_GROUPS or key in ("runs_root", "trainer.seed"):
            continue
        out.update(_flat(v, key + ".") if isinstance(v, dict) else {key: json.dumps(v, sort_keys=True)})
    return out


def _settings(config: dict, leave_out) -> frozenset:
    return frozenset((k, v) for k, v in _flat(config).items() if not leave_out(k))


def speedup_lines(groups: list[Group], axis: SpeedupAxis) -> dict[str, list[tuple[float, float]]]:
    """Per configuration (all but ``axis``), (setting value, throughput speedup) sorted by value.

    The speedup of a configuration at a value is the mean epoch time of Vanilla (parallel=sync,
    quantizer=fp32, the same settings otherwise, ``axis`` included) over its own; configurations
    without such a Vanilla, Vanilla itself (1 everywhere), and configurations with a speedup at
    one value of ``axis`` only are left out. Empty when no configuration is left. Lines are
    named by their configurations' labels without the axis's own setting.
    """

    def is_method(key: str) -> bool:
        return key.split(".")[0] in METHOD_GROUPS

    base = {}
    for g in groups:
        if _is_baseline(_config(g)) and g.stats["epoch_time_s"].mean:
            base[(g.dataset, _settings(_config(g), is_method))] = g.stats["epoch_time_s"].mean
    points: dict[frozenset, list[tuple[float, float]]] = {}
    members: dict[frozenset, list[Group]] = {}
    for g in groups:
        x, mine = axis.value(_config(g)), g.stats["epoch_time_s"].mean
        b = base.get((g.dataset, _settings(_config(g), is_method)))
        if x is None or not mine or b is None or _is_baseline(_config(g)):
            continue
        line = _settings(_config(g), lambda k: k in axis.keys)
        points.setdefault(line, []).append((x, b / mine))
        members.setdefault(line, []).append(g)
    # Lines at one value only (another study's points: 8 hosts beside a bandwidth study on 4) say nothing about the
    # axis.
    lines = [line for line, pts in points.items() if len({x for x, _ in pts}) >= 2]
    if not lines:
        return {}

    def name(g: Group) -> str:
        return " ".join(t for t in (g.label or g.config).split() if _key(t) not in axis.keys)

    labels = [name(members[line][0]) for line in lines]
    for i, line in enumerate(lines):
        if labels.count(labels[i]) > 1:  # same method at other settings: add what sets this line apart
            common = set.intersection(*(set(members[other][0].overrides) for other in lines))
            extra = [o for o in members[line][0].overrides if o not in common and _key(o) not in axis.keys]
            labels[i] = " ".join([labels[i], *extra])
    return {label: sorted(points[line]) for label, line in zip(labels, lines)}


def plot_speedup_vs(groups: list[Group], out: Path, dataset: str, axis: SpeedupAxis) -> list[Path]:
    """Throughput speedup over Vanilla against ``axis``, a line per configuration; nothing when the runs do not vary
    it."""
    lines = speedup_lines(groups, axis)
    if not lines:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    for label, pts in lines.items():
        xs, ys = zip(*pts)
        ax.plot(xs, ys, marker="o", label=label)
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="Vanilla (sync, fp32)")
    xs = sorted({x for pts in lines.values() for x, _ in pts})
    if axis.log:
        ax.set_xscale("log")
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    ax.set(xlabel=axis.xlabel, ylabel="throughput speedup over Vanilla (epoch time ratio)")
    ax.set_title(f"{dataset}: speedup over Vanilla vs {axis.name} (mean epoch time over seeds)", fontsize=11)
    ax.grid(alpha=0.3)
    _legend(ax)
    fig.tight_layout()
    paths = _save(fig, out, f"speedup_vs_{axis.name}-{dataset}")
    plt.close(fig)
    return paths


def plot_report(groups: list[Group], out: Path) -> list[Path]:
    """All report plots, per dataset (speedup vs bandwidth and vs hosts only where the runs vary them)."""
    paths = []
    for dataset in steps(list(dict.fromkeys(g.dataset for g in groups)), "plots, datasets"):
        mine = [g for g in groups if g.dataset == dataset]
        paths += plot_accuracy_vs_throughput(mine, out, dataset)
        paths += plot_bytes(mine, out, dataset)
        paths += plot_training_curves(mine, out, dataset)
        for axis in SPEEDUP_AXES:
            paths += plot_speedup_vs(mine, out, dataset, axis)
    return paths
