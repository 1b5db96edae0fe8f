"""Phase-wise memory of the launcher's data path: generate, (METIS alone), partition + build + write the parts.

Usage: python -m benchmarks.products_scale.launcher_phases NODES AVG_DEGREE [PARTS] [metis]
Per phase: ru_maxrss so far, RSS now, and the peak RSS a 20 ms sampler saw in the phase (it cannot run
while pymetis holds the GIL: take the METIS peak from ru_maxrss or /usr/bin/time -v)."""

import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from gnnq.config.compose import compose_config
from gnnq.data.part_cache import prepare_parts
from gnnq.data.partition import partition_nodes
from gnnq.data.registry import load_dataset

proc = psutil.Process()
peak = [0]


def sampler() -> None:
    while True:
        peak[0] = max(peak[0], proc.memory_info().rss)
        time.sleep(0.02)


def mark(what: str, t0: float) -> None:
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rss = proc.memory_info().rss / 2**20
    print(
        f"{what:30s} maxrss {maxrss:8.0f} rss {rss:8.0f} MiB  peak {peak[0] / 2**20:8.0f} MiB  "
        f"{time.perf_counter() - t0:6.1f}s"
    )
    peak[0] = proc.memory_info().rss


threading.Thread(target=sampler, daemon=True).start()
n, deg = int(sys.argv[1]), float(sys.argv[2])
nparts = int(sys.argv[3]) if len(sys.argv) > 3 else 4
t0 = time.perf_counter()
mark("start", t0)
cfg = compose_config(
    [
        "dataset=synthetic",
        f"dataset.num_nodes={n}",
        f"dataset.avg_degree={deg}",
        "dataset.feature_dim=100",
        "dataset.num_classes=47",
    ]
)
t0 = time.perf_counter()
g = load_dataset(cfg.dataset)
mark(f"load_dataset E={g.num_edges}", t0)
if len(sys.argv) > 4:
    t0 = time.perf_counter()
    partition_nodes(g.edge_index, g.num_nodes, nparts, "metis", 0)
    mark("metis", t0)
root = Path(tempfile.mkdtemp())
t0 = time.perf_counter()
entry, meta = prepare_parts(g, "metis", 0, nparts, root)
mark("prepare_parts", t0)
print("partition_time_s", meta["partition_time_s"], "halo", meta["halo_nodes"])
shutil.rmtree(root)
