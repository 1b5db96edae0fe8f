"""Report plots (PNG and SVG, matplotlib without a display): accuracy vs throughput with the Pareto
front marked, halo bytes per epoch by configuration, and training curves (validation vs time)."""

from __future__ import annotations

from pathlib import Path

from gnnq.report.aggregate import Group
from gnnq.report.curves import read_curve


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, out: Path, stem: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    for p in paths:
        fig.savefig(p, dpi=120)
    return paths


def short_labels(groups: list[Group]) -> list[str]:
    """Each configuration's overrides minus those every configuration shares."""
    common = set.intersection(*(set(g.overrides) for g in groups)) if groups else set()
    return [" ".join(o for o in g.overrides if o not in common) or "(common settings)" for g in groups]


def pareto_front(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats in both coordinates (higher is better in both)."""
    front = []
    for i, (x, y) in enumerate(points):
        if not any((x2 >= x and y2 >= y) and (x2 > x or y2 > y) for j, (x2, y2) in enumerate(points) if j != i):
            front.append(i)
    return sorted(front, key=lambda i: points[i][0])


def plot_accuracy_vs_throughput(groups: list[Group], out: Path, dataset: str) -> list[Path]:
    plt = _pyplot()
    mine = [g for g in groups if g.stats["test"].mean is not None and g.stats["epoch_time_s"].mean]
    labels = short_labels(mine)
    points = [(1.0 / g.stats["epoch_time_s"].mean, g.stats["test"].mean) for g in mine]
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for (x, y), g, label in zip(points, mine, labels):
        err = g.stats["test"].std
        ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, label=label)
    front = pareto_front(points)
    if front:
        ax.plot([points[i][0] for i in front], [points[i][1] for i in front], "k--", linewidth=1, label="Pareto front")
    ax.set(xlabel="throughput (training epochs / s)", ylabel="test metric (mean over seeds)")
    ax.set_title(f"{dataset}: accuracy vs throughput", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    paths = _save(fig, out, f"accuracy_vs_throughput-{dataset}")
    plt.close(fig)
    return paths


def plot_bytes(groups: list[Group], out: Path, dataset: str) -> list[Path]:
    plt = _pyplot()
    labels = short_labels(groups)
    mb = [(g.stats["comm_bytes_per_epoch"].mean or 0.0) / 1e6 for g in groups]
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(groups) + 1.5))
    ax.barh(range(len(groups)), mb)
    ax.set_yticks(range(len(groups)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set(xlabel="halo MB per training epoch (all ranks)")
    ax.set_title(f"{dataset}: bytes per epoch by configuration", fontsize=9)
    ax.grid(alpha=0.3, axis="x")
    fig.tight_layout()
    paths = _save(fig, out, f"bytes_per_epoch-{dataset}")
    plt.close(fig)
    return paths


def plot_curves(series: list[tuple[str, list[tuple[float, float]]]], out: Path, stem: str, title: str,
                target: float | None = None) -> list[Path]:  # fmt: skip
    """Validation metric against training time, one line per (label, curve)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, curve in series:
        t, v = zip(*curve) if curve else ((), ())
        ax.plot(t, v, marker="o" if len(t) <= 40 else None, markersize=3, label=label)
    if target is not None:
        ax.axhline(target, color="grey", linestyle="--", linewidth=1, label=f"target {target:.3f}")
    ax.set(xlabel="training time (s, slowest rank)", ylabel="validation metric")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    paths = _save(fig, out, stem)
    plt.close(fig)
    return paths


def plot_training_curves(groups: list[Group], out: Path, dataset: str) -> list[Path]:
    """One curve per configuration: its first seed's run."""
    series = [(label, read_curve(g.runs[0][0])) for g, label in zip(groups, short_labels(groups))]
    return plot_curves(series, out, f"curves-{dataset}", f"{dataset}: validation vs training time (first seed)")


def plot_report(groups: list[Group], out: Path) -> list[Path]:
    """All report plots, per dataset."""
    paths = []
    for dataset in dict.fromkeys(g.dataset for g in groups):
        mine = [g for g in groups if g.dataset == dataset]
        paths += plot_accuracy_vs_throughput(mine, out, dataset)
        paths += plot_bytes(mine, out, dataset)
        paths += plot_training_curves(mine, out, dataset)
    return paths
