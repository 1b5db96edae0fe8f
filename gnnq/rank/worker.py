"""A rank's work, behind the entry point ``python -m gnnq.rank --run-dir D --parts P`` (gnnq.rank.__main__).

Rank 0 writes metrics.jsonl, prints each row as a progress line for the launcher (which also
logs it to W&B) and hands the summary over in .gnnq/result.json; any rank that fails writes
.gnnq/error-rank<r>.json and exits non-zero, so torchrun stops the others and the launcher names the cause.
Every rank keeps .gnnq/heartbeat-rank<r>.json fresh (gnnq.rank.heartbeat). The file names and the
progress prefix are the launcher's too (gnnq.contract).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from gnnq.comm import Communicator
from gnnq.config.registry import PARALLEL
from gnnq.config.typed import load_run_config
from gnnq.contract import (
    CONFIG_FILE,
    ERROR_FILE,
    INTERNAL_DIR,
    LAUNCHER_PID_ENV,
    METRICS_FILE,
    PROGRESS_PREFIX,
    RESULT_FILE,
    RESUME_FILE,
    STORE_FD_ENV,
    THREADS_ENV,
)
from gnnq.data.part_cache import load_part
from gnnq.rank.heartbeat import start_heartbeat
from gnnq.track.files import strict_json, write_json_atomic, write_text_atomic
from gnnq.track.machine import torch_gpu_names
from gnnq.train.checkpoint import latest_checkpoint


class StoppedBySignal(SystemExit):
    """This rank was told to stop; the cause of the failure lies elsewhere."""


def stop_on_sigterm() -> None:
    """torchrun stops surviving ranks with SIGTERM: unwind so the error files are still written."""

    def handler(signum, frame):
        raise StoppedBySignal(f"stopped by {signal.Signals(signum).name} (another rank failed or the job was stopped)")

    signal.signal(signal.SIGTERM, handler)


def threads_per_rank(cfg) -> int:
    if cfg.cluster.threads_per_rank > 0:
        return cfg.cluster.threads_per_rank
    if os.environ.get(THREADS_ENV):  # emulated hosts: the launcher split the machine's cores between them
        return int(os.environ[THREADS_ENV])
    return max(1, len(os.sched_getaffinity(0)) // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def _backend(cfg) -> str:
    if cfg.cluster.backend != "auto":
        return cfg.cluster.backend
    return "nccl" if torch.cuda.is_available() else "gloo"


def rank_device(backend: str, device: str, local_rank: int, gpus: int) -> torch.device:
    """The device a rank computes on (``cluster.device``): NCCL needs a GPU per local rank (it refuses two ranks
    on one GPU); gloo with ``cuda`` shares the ``gpus`` GPUs round-robin and moves messages through host memory."""
    if device == "cpu" or (device == "auto" and backend != "nccl"):
        return torch.device("cpu")
    if gpus == 0:
        raise ValueError(f"cluster.device={device} with cluster.backend={backend} needs a GPU; none is visible")
    if backend == "nccl" and local_rank >= gpus:
        raise ValueError(
            f"cluster.backend=nccl needs a GPU per rank: local rank {local_rank} has none of its own ({gpus} "
            "visible); NCCL refuses two ranks on one GPU. Use fewer ranks per host (cluster.nproc), or "
            "cluster.backend=gloo cluster.device=cuda to share the GPUs"
        )
    return torch.device("cuda", local_rank % gpus)


def open_metrics(run_dir: Path, resume: bool):
    """metrics.jsonl for appending rows; on resume, cut back to the rows up to the checkpoint's epoch."""
    path = run_dir / METRICS_FILE
    if not resume:
        return open(path, "w")
    latest = latest_checkpoint(run_dir)
    upto = latest["epoch"] if latest else 0
    kept = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            if json.loads(line)["epoch"] <= upto:
                kept.append(line + "\n")
        except (ValueError, KeyError, TypeError):  # a row cut short by the crash
            continue
    write_text_atomic(path, "".join(kept))
    return open(path, "a")


def init_group(backend: str, timeout: datetime.timedelta) -> None:
    """The process group from the environment. Under torchrun: env://. Started by gnnq itself (gnnq.launch.ranks):
    rank 0 serves the store on the loopback socket its launcher handed over (torch would listen on every
    interface), the others connect to it."""
    if LAUNCHER_PID_ENV not in os.environ:
        dist.init_process_group(backend, timeout=timeout)
        return
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    fd = os.environ.pop(STORE_FD_ENV, None)
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world,
        is_master=fd is not None,
        timeout=timeout,
        wait_for_workers=False,
        **({"master_listen_fd": int(fd)} if fd is not None else {}),
    )
    dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)


@record  # main() catches everything and exits; run() is where an exception still passes, for torch elastic's error file
def run(run_dir: Path, parts_dir: Path) -> None:
    cfg = load_run_config(run_dir / CONFIG_FILE)
    torch.set_num_threads(threads_per_rank(cfg))
    backend = _backend(cfg)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    device = rank_device(backend, cfg.cluster.device, int(os.environ.get("LOCAL_RANK", "0")), gpus)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    init_group(backend, datetime.timedelta(seconds=cfg.cluster.timeout_s))
    run_point(cfg, run_dir, parts_dir, device)
    dist.destroy_process_group()


def run_point(cfg, run_dir: Path, parts_dir: Path, device: torch.device, part_of=load_part) -> None:
    """One run on the process group already initialized: its part, its trainer, its metrics and result files.

    Shared by ``run`` (one run per process) and gnnq.rank.warm (a warm pool's rank: one run after another);
    ``part_of(parts_dir, index)`` loads a part (the pool's keeps it loaded)."""
    rank = dist.get_rank()
    resume = (run_dir / INTERNAL_DIR / RESUME_FILE).is_file()
    shared = PARALLEL.choice(cfg.parallel.name).resources.shared_part  # one part, every rank reads it
    part = part_of(parts_dir, 0 if shared else rank)
    comm = Communicator()
    metrics_file = open_metrics(run_dir, resume) if rank == 0 else None

    def on_epoch(row: dict) -> None:
        line = strict_json(row)  # NaN/inf as null: any JSON parser reads the file
        metrics_file.write(line + "\n")
        metrics_file.flush()
        print(PROGRESS_PREFIX + line, flush=True)

    callback = on_epoch if rank == 0 else None
    trainer = PARALLEL.trainer(cfg.parallel.name)  # one signature (gnnq.train.driver.TrainFn)
    summary = trainer(cfg, part, comm, callback, device=device, cache_dir=parts_dir, run_dir=run_dir, resume=resume)
    if rank == 0:
        metrics_file.close()
        summary = {**summary, "gpu_names": torch_gpu_names()}  # the record's machine: the GPUs torch saw
        write_json_atomic(run_dir / INTERNAL_DIR / RESULT_FILE, summary)
    # Tear down together: a rank destroying its gloo group while a peer is still
    # communicating can abort the peer ("terminate called without an active exception").
    comm.barrier()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m gnnq.rank", description=__doc__)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--parts", type=Path, required=True)
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    stop_on_sigterm()
    start_heartbeat(args.run_dir / INTERNAL_DIR, rank)  # tells the launcher which rank stopped, if one does
    try:
        run(args.run_dir, args.parts)
        sys.stdout.flush()
        sys.stderr.flush()
        # Everything is written and the group destroyed. Skip interpreter teardown: gloo threads
        # still being destructed there intermittently abort the process
        # ("terminate called without an active exception"), failing a finished run.
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - every failure must reach the launcher
        report_failure(args.run_dir, rank, exc)
        os._exit(1)  # do not wait in process-group teardown for peers that may be blocked


def report_failure(run_dir: Path, rank: int, exc: BaseException) -> None:
    """Write this rank's error file for the launcher (gnnq.launch.failure) and print the traceback to the log."""
    message = f"{type(exc).__name__}: {exc}".splitlines()[0] if str(exc) else type(exc).__name__
    report = {
        "rank": rank,
        "message": message,
        "traceback": traceback.format_exc(),
        "time": time.time(),
        "stopped": isinstance(exc, StoppedBySignal),
    }
    try:
        write_json_atomic(run_dir / INTERNAL_DIR / ERROR_FILE.format(rank=rank), report)
    except OSError:  # e.g. the disk that just filled up: the traceback below still names the cause in the log
        pass
    traceback.print_exc()
    sys.stderr.flush()
    sys.stdout.flush()
