"""Small real graphs, small dataset folders, file damage, and a runner for functions on real gloo process groups."""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from gnnq.data.graph import Graph


def random_graph(
    num_nodes: int = 90,
    num_edges: int = 500,
    num_features: int = 12,
    num_classes: int = 4,
    seed: int = 0,
    directed: bool = True,
) -> Graph:
    """A random graph with some one-way edges (so in- and out-degrees differ) and isolated nodes."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes - 3, num_edges)  # the last 3 nodes send nothing
    dst = rng.integers(0, num_nodes, num_edges)
    if not directed:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    keep = src != dst
    key = np.unique(src[keep] * num_nodes + dst[keep])
    edge_index = np.stack([key // num_nodes, key % num_nodes]).astype(np.int64)
    split = rng.permutation(num_nodes)
    masks = [np.zeros(num_nodes, dtype=bool) for _ in range(3)]
    masks[0][split[: num_nodes // 2]] = True
    masks[1][split[num_nodes // 2 : 3 * num_nodes // 4]] = True
    masks[2][split[3 * num_nodes // 4 :]] = True
    return Graph(
        name="random",
        edge_index=edge_index,
        x=rng.standard_normal((num_nodes, num_features)).astype(np.float32),
        y=rng.integers(0, num_classes, num_nodes).astype(np.int64),
        train_mask=masks[0],
        val_mask=masks[1],
        test_mask=masks[2],
        num_classes=num_classes,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world_size, port, fn, args, out_dir, environ):
    os.environ.clear()
    os.environ.update(environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        result = fn(*args)
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
        dist.barrier()  # tear down together: a peer still communicating can abort on a destroyed group
    finally:
        dist.destroy_process_group()
    # Done and saved. Skip interpreter teardown, where gloo threads being destructed intermittently
    # abort the process ("terminate called without an active exception"), as the worker does.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# The ranks are forked from a forkserver that imported torch and gnnq once (not spawned, each importing
# them again: seconds per rank on 2 cores). A fresh process like a spawned one: no state of the test's
# process but its environment, which each rank takes over as it is at the call.
PRELOAD = [
    "torch",
    "torch.distributed",
    "gnnq.comm",
    "gnnq.parallel",
    "gnnq.models",
    "gnnq.train.full_graph",
    "tests.helpers",
]


def run_distributed(world_size: int, fn, *args) -> list:
    """Run ``fn(*args)`` on ``world_size`` processes joined in a gloo group; return each rank's result."""
    mp.set_forkserver_preload(PRELOAD)
    with tempfile.TemporaryDirectory() as out_dir:
        mp.start_processes(
            _worker,
            args=(world_size, _free_port(), fn, args, out_dir, dict(os.environ)),
            nprocs=world_size,
            join=True,
            start_method="forkserver",
        )
        return [torch.load(os.path.join(out_dir, f"rank{r}.pt"), weights_only=False) for r in range(world_size)]


def write_csv_gz(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(np.asarray(rows)).to_csv(path, header=False, index=False, compression="gzip")


def make_ogbn_arxiv(root: Path, n: int = 60, e: int = 200, f: int = 8, classes: int = 40, seed: int = 0) -> dict:
    """A tiny directory in OGB's ogbn-arxiv layout (what OGB's zip extracts to)."""
    rng = np.random.default_rng(seed)
    d = root / "ogbn_arxiv"
    edges = rng.integers(0, n, size=(e, 2))
    x = rng.standard_normal((n, f)).astype(np.float32)
    y = rng.permutation(np.arange(n) % classes).reshape(n, 1)  # every class has a node, as in the real data
    write_csv_gz(d / "raw" / "edge.csv.gz", edges)
    write_csv_gz(d / "raw" / "node-feat.csv.gz", x)
    write_csv_gz(d / "raw" / "node-label.csv.gz", y)
    write_csv_gz(d / "raw" / "node_year.csv.gz", rng.integers(2000, 2020, size=(n, 1)))
    write_csv_gz(d / "raw" / "num-node-list.csv.gz", [[n]])
    write_csv_gz(d / "raw" / "num-edge-list.csv.gz", [[e]])
    perm = rng.permutation(n)
    split = {"train": perm[: n // 2], "valid": perm[n // 2 : 3 * n // 4], "test": perm[3 * n // 4 :]}
    for part, ids in split.items():
        write_csv_gz(d / "split" / "time" / f"{part}.csv.gz", ids.reshape(-1, 1))
    (d / "RELEASE_v1.txt").write_text("ogbn-arxiv v1 (test fixture)\n")
    return {"edges": edges, "x": x, "y": y[:, 0], "split": split}


def flip_byte(path: Path, at: float = 0.5) -> None:
    """Flip one bit of the byte at fraction ``at`` of ``path``: damage that keeps the size."""
    data = bytearray(path.read_bytes())
    data[int(len(data) * at)] ^= 0x01
    path.write_bytes(bytes(data))
