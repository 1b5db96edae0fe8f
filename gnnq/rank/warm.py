"""A rank of a warm pool (``python -m gnnq.rank.serve --timeout-s T``, started by gnnq.launch.warm_pool).

It joins the pool's gloo group once, as a local job's rank does (gnnq.rank.worker.init_group: rank 0 serves the
store on the loopback socket the launcher bound and handed over), says ``WARM_READY`` on stdout, then runs one
run after another as the launcher asks on stdin (one JSON object a line: ``{"run_dir", "parts", "env"}``;
``{"stop": true}`` or the end of stdin ends it). Each run is what ``python -m gnnq.rank`` does
(``gnnq.rank.worker.run_point``: the run's config, seed, model, optimizer and files are its own), with the same
heartbeat and error files in its run dir; the part stays loaded while the next run reads the same parts. After
each run the rank prints ``WARM_DONE`` with ``{"ok": bool}``; after a failed one it exits (the launcher replaces
the pool: a peer may still be blocked in a collective).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from gnnq.config.typed import load_run_config
from gnnq.contract import CONFIG_FILE, INTERNAL_DIR, WARM_DONE_PREFIX, WARM_READY
from gnnq.data.part_cache import load_part
from gnnq.rank.heartbeat import start_heartbeat
from gnnq.rank.worker import init_group, report_failure, run_point, stop_on_sigterm, threads_per_rank

KEPT_PART_MAX_BYTES = 512 * 2**20  # larger part files are read for each run: a kept one would double their memory


class PartCache:
    """The parts of the latest parts directory this rank read, checked once (a new directory drops the old one's).

    Each run gets its own copy: nothing a run does to its part's tensors reaches the next run. A part whose file
    is over ``KEPT_PART_MAX_BYTES`` is not kept (read again for each run, as a torchrun rank reads it)."""

    def __init__(self):
        self.key: tuple | None = None
        self.parts: dict[int, object] = {}

    def __call__(self, parts_dir: Path, index: int):
        meta = Path(parts_dir) / "meta.json"
        key = (str(parts_dir), meta.stat().st_mtime_ns if meta.is_file() else None)  # an entry rebuilt in place: anew
        if key != self.key:
            self.key, self.parts = key, {}
        if index in self.parts:
            return self.parts[index].clone()
        part = load_part(parts_dir, index)
        file = Path(parts_dir) / f"part{index}.pt"
        if file.is_file() and file.stat().st_size <= KEPT_PART_MAX_BYTES:
            self.parts[index] = part.clone()
        return part


def reset_peak_memory() -> None:
    """Start this process's peak resident memory (VmHWM) afresh, so that a run's record counts its own peak."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def _groups() -> set:
    """The process groups this process holds (the default one and those a run made with ``dist.new_group``)."""
    world = getattr(dist.distributed_c10d, "_world", None)
    return set(getattr(world, "pg_map", {}) or {})


def serve_one(job: dict, rank: int, parts: PartCache) -> bool:
    """Run the job ``job`` names on this rank; True if it finished. A failure leaves its error file."""
    run_dir, parts_dir = Path(job["run_dir"]), Path(job["parts"])
    for key, value in job.get("env", {}).items():  # what a torchrun rank would inherit from the launcher now
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    beat = start_heartbeat(run_dir / INTERNAL_DIR, rank)
    reset_peak_memory()
    before = _groups()
    try:
        cfg = load_run_config(run_dir / CONFIG_FILE)
        torch.set_num_threads(threads_per_rank(cfg))
        run_point(cfg, run_dir, parts_dir, torch.device("cpu"), part_of=parts)
        for group in _groups() - before:  # the run's own groups (e.g. an overlapped exchange's): not kept
            dist.destroy_process_group(group)
        return True
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the launcher
        report_failure(run_dir, rank, exc)
        return False
    finally:
        beat.set()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gnnq.rank.serve", description=__doc__)
    parser.add_argument("--timeout-s", type=float, required=True)
    args = parser.parse_args(argv)
    rank = int(os.environ["RANK"])
    stop_on_sigterm()
    init_group("gloo", datetime.timedelta(seconds=args.timeout_s))
    parts = PartCache()
    print(WARM_READY, flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        if job.get("stop"):
            break
        ok = serve_one(job, rank, parts)
        print(WARM_DONE_PREFIX + json.dumps({"ok": ok}), flush=True)
        if not ok:
            os._exit(1)  # do not wait in process-group teardown for peers that may be blocked
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # as a torchrun rank: no interpreter teardown with gloo threads still running
