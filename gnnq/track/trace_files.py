"""The trace files of a run (``trainer.trace=true``): ``trace/meta.json`` and ``trace/rank<r>.jsonl``
(the format: docs/runs.md#traces)."""

from __future__ import annotations

import json
from pathlib import Path

from gnnq.track.files import strict_json, write_json_atomic

TRACE_DIR = "trace"
TRACE_VERSION = 1
META_FILE = "meta.json"
RANK_FILE = "rank{rank}.jsonl"
CLOCK = "perf_counter seconds, relative to each epoch's start on that rank"


def write_meta(run_dir: Path, meta: dict) -> Path:
    """Write ``trace/meta.json`` (version and clock added); its path."""
    path = Path(run_dir) / TRACE_DIR / META_FILE
    write_json_atomic(path, {"version": TRACE_VERSION, **meta, "clock": CLOCK})
    return path


class EpochLines:
    """``trace/rank<r>.jsonl``: one line per traced epoch, written (and flushed) as each epoch ends.

    ``resume``: a resumed run keeps the lines its earlier attempt wrote for the epochs before the first one it
    trains (those after its checkpoint are trained again, and their old lines dropped); else the file starts
    empty."""

    def __init__(self, run_dir: Path, rank: int, resume: bool = False):
        self.path = Path(run_dir) / TRACE_DIR / RANK_FILE.format(rank=rank)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._earlier = self.path.read_text().splitlines() if resume and self.path.is_file() else None
        self._file = self.path.open("a" if resume else "w")

    def __call__(self, line: dict) -> None:
        if self._earlier is not None:  # the first epoch of a resumed run: its earlier attempt's lines up to it
            kept = [old + "\n" for old in self._earlier if old.strip() and json.loads(old)["epoch"] < line["epoch"]]
            self._file.close()
            self.path.write_text("".join(kept))
            self._file, self._earlier = self.path.open("a"), None
        self._file.write(strict_json(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_trace(run_dir: Path) -> tuple[dict, dict[int, list[dict]]]:
    """(meta, {rank: [epoch lines]}) of a traced run dir."""
    base = Path(run_dir) / TRACE_DIR
    meta = json.loads((base / META_FILE).read_text())
    ranks = {
        r: [json.loads(line) for line in (base / RANK_FILE.format(rank=r)).read_text().splitlines() if line.strip()]
        for r in range(meta["world_size"])
    }
    return meta, ranks
