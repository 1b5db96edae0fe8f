"""What the launching terminal shows: a live progress line and a final summary table."""

from __future__ import annotations

import sys
import time
from typing import TextIO


def fmt_value(value, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


class ProgressLine:
    """One line rewritten in place on a terminal; otherwise (logs, CI) every 10% of epochs or 10 s."""

    def __init__(self, total_epochs: int, stream: TextIO = sys.stdout):
        self.total = total_epochs
        self.stream = stream
        self.tty = stream.isatty()
        self.every = max(1, total_epochs // 10)
        self.start = self.last_print = time.perf_counter()
        self.best_val = None
        self.dirty = False

    def update(self, row: dict) -> None:
        if row.get("val") is not None and (self.best_val is None or row["val"] > self.best_val):
            self.best_val = row["val"]
        epoch = row["epoch"]
        width = 24
        filled = int(width * epoch / max(1, self.total))
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] epoch {epoch}/{self.total}  loss {fmt_value(row['loss'])}  "
            f"val {fmt_value(row.get('val'))} (best {fmt_value(self.best_val)})  epoch {row['epoch_time_s'] * 1000:.1f} ms  "
            f"elapsed {time.perf_counter() - self.start:.0f}s"
        )
        if self.tty:
            self.stream.write("\r\033[K" + line)
            self.dirty = True
        elif epoch % self.every == 0 or epoch == self.total or time.perf_counter() - self.last_print > 10:
            self.stream.write(line + "\n")
            self.last_print = time.perf_counter()
        self.stream.flush()

    def close(self) -> None:
        if self.dirty:
            self.stream.write("\n")
            self.stream.flush()
            self.dirty = False


def markdown_table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def summary_table(record: dict) -> str:
    s = record.get("summary") or {}
    metric = s.get("metric", "accuracy")
    admm = "admm" in s  # an epoch is one ADMM iteration; its messages are p and q, not halo rows
    bytes_label = "p/q bytes / iteration (all ranks)" if admm else "halo bytes / epoch (all ranks)"
    rows = [
        ["status", record["status"]],
        [f"best val {metric}", fmt_value(record.get("best_val"))],
        [f"test {metric} (at best val)", fmt_value(record.get("test"))],
        ["best epoch", s.get("best_epoch", "-")],
        ["epoch time (median)", f"{record['epoch_time_s'] * 1000:.1f} ms" if record.get("epoch_time_s") else "-"],
        ["comm time (median)", f"{record['comm_time_s'] * 1000:.1f} ms" if record.get("comm_time_s") is not None else "-"],
        [bytes_label, f"{record['comm_bytes_per_epoch']:,}" if record.get("comm_bytes_per_epoch") is not None else "-"],
        ["ranks", record.get("world_size") or "-"],
        ["peak memory / rank (MiB)", ", ".join(f"{m:.0f}" for m in s.get("peak_memory_mib_per_rank", [])) or "-"],
    ]
    return markdown_table(["result", "value"], rows)
