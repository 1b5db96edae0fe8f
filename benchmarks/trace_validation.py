"""The table of the traced validation runs (results/projection/validation): per setting and method, the measured
epoch time and what the traces hold.

    python -m benchmarks.trace_validation results/projection/validation/runs

Reads every run dir under the given folder (``<setting>/<n>_experiment=<name>/``: record.json, metrics.jsonl,
trace/); prints a Markdown table. Epoch ms: the median over the run's epochs of the slowest rank's epoch
(record.json's ``epoch_time_s``); from the traces: the median over epochs of the slowest rank's ``epoch_s``,
halo MB per epoch as the posts' ``send_bytes`` (all ranks) and whether they equal the rows' ``comm_bytes``.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from gnnq.track.progress import markdown_table
from gnnq.track.trace_files import read_trace


def run_row(setting: str, run_dir: Path) -> list:
    record = json.loads((run_dir / "record.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    meta, ranks = read_trace(run_dir)
    epochs = len(rows)
    slowest = [max(ranks[r][i]["epoch_s"] for r in ranks) for i in range(epochs)]
    sent = [
        sum(
            sum(e["send_bytes"])
            for r in ranks
            for e in ranks[r][i]["events"]
            if e["op"] == "post" and e["category"] == "halo_train"
        )
        for i in range(epochs)
    ]
    cluster = meta["cluster"]
    return [
        setting,
        meta["method"]["experiment"],
        record["status"],
        f"{record['epoch_time_s'] * 1e3:.0f}",
        " ".join(f"{t * 1e3:.0f}" for t in slowest),
        f"{statistics.median(slowest) * 1e3:.0f}",
        f"{statistics.median(r['comm_time_s'] / r['epoch_time_s'] for r in rows):.0%}",
        f"{statistics.median(sent) / 1e6:.1f}",
        "yes" if sent == [r["comm_bytes"] for r in rows] else "NO",
        f"{meta['hosts']} x {meta['ranks_per_host']}, {cluster['link_mbit']:g} Mbit/s, "
        f"{cluster['cores_per_host']:g} core(s)/host {'pinned' if cluster['pinned'] else 'shared'}",
    ]


def main(argv: list[str] | None = None) -> None:
    root = Path((argv if argv is not None else sys.argv[1:])[0])
    rows = []
    for setting in sorted(p for p in root.iterdir() if p.is_dir()):
        for run_dir in sorted(p for p in setting.iterdir() if (p / "record.json").is_file()):
            rows.append(run_row(setting.name, run_dir))
    headers = [
        "setting",
        "method",
        "status",
        "epoch ms",
        "per-epoch ms (slowest rank, traces)",
        "trace median ms",
        "comm share",
        "halo MB/epoch",
        "bytes = record",
        "cluster (meta.json)",
    ]
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
