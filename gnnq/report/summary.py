"""``gnnq-report DIR...``: one table row per run record found under the given directories."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gnnq.track.progress import fmt_value, markdown_table
from gnnq.track.record import RECORD_FILE


def find_records(dirs: list[Path]) -> tuple[list[tuple[Path, dict]], list[str]]:
    records, warnings = [], []
    for d in dirs:
        for path in sorted(Path(d).rglob(RECORD_FILE)):
            try:
                rec = json.loads(path.read_text())
                rec["status"], rec["config"]  # noqa: B018 - both must be present
            except (OSError, ValueError, KeyError, TypeError) as exc:
                warnings.append(f"skipping {path}: unreadable record ({type(exc).__name__})")
                continue
            records.append((path.parent, rec))
    return records, warnings


def records_table(records: list[tuple[Path, dict]]) -> str:
    rows = []
    for run_dir, r in records:
        c = r["config"]
        rows.append([
            run_dir.name, c["dataset"]["name"], c["model"]["name"], c["partitioner"]["name"], c["parallel"]["name"],
            c["quantizer"]["name"], r.get("world_size") or c["cluster"]["nproc"], r["status"], fmt_value(r.get("best_val")),
            fmt_value(r.get("test")), fmt_value(r.get("epoch_time_s") and r["epoch_time_s"] * 1000, ".1f"),
            "-" if r.get("comm_bytes_per_epoch") is None else f"{r['comm_bytes_per_epoch']:,}",
        ])  # fmt: skip
    headers = ["run", "dataset", "model", "partitioner", "parallel", "quantizer", "ranks", "status",
               "best val", "test", "epoch ms", "halo bytes/epoch"]  # fmt: skip
    return markdown_table(headers, rows)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="gnnq-report", description=__doc__)
    parser.add_argument("dirs", nargs="+", type=Path, help="directories searched recursively for record.json")
    args = parser.parse_args(argv)
    records, warnings = find_records(args.dirs)
    for w in warnings:
        print(f"gnnq-report: warning: {w}", file=sys.stderr)
    if not records:
        print("gnnq-report: no run records found", file=sys.stderr)
        sys.exit(1)
    print(records_table(records))
    for run_dir, r in records:
        if r["status"] != "ok":
            print(f"failed: {run_dir}: {r.get('error')}")
