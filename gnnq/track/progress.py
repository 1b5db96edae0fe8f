"""What the launching terminal shows: a live progress bar (tqdm, with ETA) and a final summary table."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tqdm import tqdm

from gnnq.config.registry import PARALLEL

BAR_FORMAT = "{desc} {n_fmt}/{total_fmt} [{bar:24}] {elapsed}<{remaining}{postfix}"
BAR_CHARS = ".#"  # ASCII: logs stay plain text


def fmt_value(value, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


class ProgressLine:
    """The epoch bar (tqdm): rewritten in place on a terminal; otherwise (logs, CI) one line per
    update, every 10% of epochs or 10 s. The ETA counts from the first row, so a resumed run's
    epochs before it do not make it look fast."""

    def __init__(self, total_epochs: int, stream: TextIO | None = None):
        self.total = total_epochs
        self.stream = stream or sys.stdout  # read now: gnnq's console streams (gnnq.launch.console) replace it
        self.tty = self.stream.isatty()
        self.every = max(1, total_epochs // 10)
        self.bar: tqdm | None = None  # terminal only
        self.start = self.last_print = time.perf_counter()
        self.initial: int | None = None  # epochs done before the first row (a resumed run)
        self.best_val = None

    def update(self, row: dict) -> None:
        if row.get("val") is not None and (self.best_val is None or row["val"] > self.best_val):
            self.best_val = row["val"]
        epoch = row["epoch"]
        if self.initial is None:
            self.initial, self.start = epoch - 1, time.perf_counter() - row["epoch_time_s"]
        postfix = (
            f"loss {fmt_value(row['loss'])}  val {fmt_value(row.get('val'))} (best {fmt_value(self.best_val)})  "
            f"epoch {row['epoch_time_s'] * 1000:.1f} ms"
        )
        if self.tty:
            if self.bar is None:
                self.bar = tqdm(
                    total=self.total,
                    initial=self.initial,
                    desc="epoch",
                    file=self.stream,
                    bar_format=BAR_FORMAT,
                    ascii=BAR_CHARS,
                    mininterval=0.0,
                    dynamic_ncols=True,
                )
            self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(epoch - self.bar.n)
        elif epoch % self.every == 0 or epoch == self.total or time.perf_counter() - self.last_print > 10:
            line = tqdm.format_meter(
                epoch,
                self.total,
                time.perf_counter() - self.start,
                prefix="epoch",
                postfix=postfix,
                bar_format=BAR_FORMAT,
                ascii=BAR_CHARS,
                initial=self.initial,
            )
            self.stream.write(line + "\n")
            self.stream.flush()
            self.last_print = time.perf_counter()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def markdown_table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |" for r in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def summary_table(record: dict) -> str:
    s = record.get("summary") or {}
    metric = s.get("metric", "accuracy")
    name = ((record.get("config") or {}).get("parallel") or {}).get("name")
    messages, epoch = (
        (PARALLEL.choice(name).messages, PARALLEL.choice(name).epoch) if name in PARALLEL else ("halo", "epoch")
    )
    bytes_label = f"{messages} bytes / {epoch} (all ranks)"  # what the method's epochs and messages are
    rows = [
        ["status", record["status"]],
        [f"best val {metric}", fmt_value(record.get("best_val"))],
        [f"test {metric} (at best val)", fmt_value(record.get("test"))],
        ["best epoch", s.get("best_epoch", "-")],
        *(
            [["stopped early", f"after epoch {s['stopped_early']['epoch']}: {s['stopped_early']['reason']}"]]
            if s.get("stopped_early")
            else []
        ),
        ["epoch time (median)", f"{record['epoch_time_s'] * 1000:.1f} ms" if record.get("epoch_time_s") else "-"],
        [
            "comm time, exposed (median)",
            f"{record['comm_time_s'] * 1000:.1f} ms" if record.get("comm_time_s") is not None else "-",
        ],
        ["overheads outside epochs", f"{s['overhead_time_s']:.2f} s" if s.get("overhead_time_s") is not None else "-"],
        [
            "throughput (with overheads)",
            f"{s['throughput_epochs_per_s']:.2f} epochs/s" if s.get("throughput_epochs_per_s") else "-",
        ],
        [bytes_label, f"{record['comm_bytes_per_epoch']:,}" if record.get("comm_bytes_per_epoch") is not None else "-"],
        *traffic_rows(s),
        ["ranks", record.get("world_size") or "-"],
        ["peak memory / rank (MiB)", ", ".join(f"{m:.0f}" for m in s.get("peak_memory_mib_per_rank", [])) or "-"],
    ]
    return markdown_table(["result", "value"], rows)


# The bytes a run moves besides its training messages: (summary key, row label); rows only where the record has them.
OTHER_TRAFFIC = (
    ("grad_sync_bytes_per_epoch", "gradient all-reduce bytes / epoch (trainer.grad_sync)"),
    ("eval_comm_bytes_per_epoch", "evaluation bytes / epoch"),
    ("setup_comm_bytes", "setup bytes (once)"),
    ("overhead_bytes", "overhead bytes (once: profiles, alpha)"),
)


def traffic_rows(summary: dict) -> list[list]:
    """One row per kind of traffic the summary counts besides the training messages (gnnq-report's bytes chart
    shows the same kinds)."""
    return [[label, f"{summary[key]:,}"] for key, label in OTHER_TRAFFIC if isinstance(summary.get(key), int)]
