"""Sylvie's own Reddit accuracy curves beside gnnq's runs of the same model: one plot, per-epoch accuracy.

    python -m benchmarks.sylvie_curves --theirs results/peers/today/sylvie_curves/sylvie_reddit_gcn_b56ea75.csv \\
        --run "gnnq Vanilla (fp32)=<run dir>" --run "gnnq sylvie=<run dir>" --out results/peers/today/sylvie_curves

``--theirs``: a CSV with columns ``curve,epoch,acc,loss``, the numbers of Sylvie's committed result files
(zxmeng98/Sylvie, ``results/reddit_gcn_{fp32,int1,mix}.csv``; the README beside the plot names the commit):
``epoch`` is their loop index (0-based; the evaluation after the 10th epoch reads 9), ``acc`` their validation
accuracy (``evaluate_induc(..., 'val')``, rank 0, every 10 epochs). ``--run LABEL=DIR``: a gnnq run directory; its
``metrics.jsonl`` gives the validation and test accuracy of every evaluated epoch (gnnq counts epochs from 1).
Both are drawn against epochs trained. Writes ``curves.png`` and ``curves.json`` (the plotted points) into ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from gnnq.contract import METRICS_FILE


def read_theirs(path: Path) -> dict[str, list[tuple[int, float]]]:
    """Curve name -> (epochs trained, validation accuracy), from Sylvie's numbers."""
    curves: dict[str, list[tuple[int, float]]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            curves.setdefault(row["curve"], []).append((int(row["epoch"]) + 1, float(row["acc"])))
    if not curves:
        raise SystemExit(f"{path}: no rows (want columns curve,epoch,acc,loss)")
    return curves


def read_run(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """'val' and 'test' -> (epoch, accuracy) at every evaluated epoch of a gnnq run."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        raise SystemExit(f"{run_dir}: no {METRICS_FILE} (give a gnnq run directory)")
    out: dict[str, list[tuple[int, float]]] = {"val": [], "test": []}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        for split in out:
            if row.get(split) is not None:
                out[split].append((int(row["epoch"]), float(row[split])))
    return out


def _label_and_dir(text: str) -> tuple[str, Path]:
    label, sep, run_dir = text.partition("=")
    if not sep or not label or not run_dir:
        raise argparse.ArgumentTypeError(f"--run {text!r}: want LABEL=RUN_DIR")
    return label, Path(run_dir)


def plot(theirs: dict, runs: dict[str, dict], out: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    last = max((e for curves in runs.values() for points in curves.values() for e, _ in points), default=0)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, xmax in zip(axes, (None, last + 5)):
        for name, points in theirs.items():
            xs, ys = zip(*points)
            ax.plot(xs, ys, linestyle="--", marker=".", label=f"Sylvie's Reddit, {name} (val)")
        for label, curves in runs.items():
            for split, style in (("val", "-"), ("test", ":")):
                if curves[split]:
                    xs, ys = zip(*curves[split])
                    ax.plot(xs, ys, linestyle=style, marker=".", label=f"{label} ({split})")
        if xmax:
            ax.set_xlim(0, xmax)
        ax.set_xlabel("epochs trained" + (f" (gnnq's {last})" if xmax else " (all of Sylvie's)"))
        ax.set_ylabel("accuracy")
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=9)
    path = out / "curves.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--theirs", type=Path, required=True, help="CSV curve,epoch,acc,loss of Sylvie's numbers")
    parser.add_argument("--run", type=_label_and_dir, action="append", required=True, help="LABEL=gnnq run dir")
    parser.add_argument("--out", type=Path, required=True, help="folder for curves.png and curves.json")
    parser.add_argument("--title", default="Sylvie's committed Reddit GCN curves vs gnnq on Reddit-like")
    args = parser.parse_args(argv)
    theirs = read_theirs(args.theirs)
    runs = {label: read_run(run_dir) for label, run_dir in args.run}
    args.out.mkdir(parents=True, exist_ok=True)
    png = plot(theirs, runs, args.out, args.title)
    (args.out / "curves.json").write_text(json.dumps({"sylvie": theirs, "gnnq": runs}, indent=1) + "\n")
    print(f"wrote {png} and {args.out / 'curves.json'}")


if __name__ == "__main__":
    main()
