"""CPU seconds per pdADMM-G iteration on each rank, by parallel.blocks: how balanced the blocks are,
measured where a loaded machine's wall clock cannot say it (process CPU time counts only the rank's
own work, not the time other jobs hold its core). Cora's 10 x 500 GA-MLP sizes (140 training rows,
7,165 inputs), random data, one intra-op thread and one core per rank, gloo on this machine:

    python -m benchmarks.admm_cpu_per_rank --iterations 10 --ranks 2,4
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gnnq.admm.block import Penalties
from gnnq.admm.train import build_block, iterate
from gnnq.comm.accounting import ADMM_TRAIN
from gnnq.comm.communicator import Communicator

DIMS = [7165] + [500] * 9 + [7]
ROWS, CLASSES = 140, 7


def _rank(rank: int, world: int, port: int, blocks: str, iterations: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    os.sched_setaffinity(0, {rank % os.cpu_count()})
    comm = Communicator()
    gen = torch.Generator().manual_seed(0)
    x, y = torch.rand(ROWS, DIMS[0], generator=gen), torch.randint(0, CLASSES, (ROWS,), generator=gen)
    block, links = build_block(
        comm, x, y, DIMS, 0, None, None, "identity", blocks=blocks, train_comm=comm.with_own_group()
    )
    pen = Penalties(1.0, 1.0, 0.01)
    iterate(block, links, pen)  # the first iteration is not timed
    comm.stats.reset()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(iterations):
        iterate(block, links, pen)  # blocking q: the CPU time of a rank is the same either way
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    torch.save(
        {
            "layers": [block.first, block.last],
            "cpu_ms": 1e3 * cpu / iterations,
            "wall_ms": 1e3 * wall / iterations,
            "wait_ms": 1e3 * comm.stats.total_seconds(ADMM_TRAIN) / iterations,
        },
        os.path.join(out, f"rank{rank}.pt"),
    )
    dist.destroy_process_group()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--ranks", default="2,4")
    args = parser.parse_args()
    print("| ranks | blocks | layers per rank | CPU ms / iteration per rank | largest | wall ms / iteration (loaded) |")
    print("|---|---|---|---|---|---|")
    for world in map(int, args.ranks.split(",")):
        for blocks in ("layers", "cost"):
            with tempfile.TemporaryDirectory() as out:
                mp.spawn(_rank, args=(world, _port(), blocks, args.iterations, out), nprocs=world, join=True)
                res = [torch.load(os.path.join(out, f"rank{r}.pt")) for r in range(world)]
            spans = ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in (r["layers"] for r in res))
            cpu = ", ".join(f"{r['cpu_ms']:.0f}" for r in res)
            print(
                f"| {world} | {blocks} | {spans} | {cpu} | {max(r['cpu_ms'] for r in res):.0f} | "
                f"{max(r['wall_ms'] for r in res):.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
