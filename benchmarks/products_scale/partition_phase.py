"""The launcher's partition phase alone (what `gnnq` refuses to reach at 2.45M nodes with the default model):
generate, check the launcher estimate against MemAvailable (plus what this process holds), prepare_parts.

Usage: /usr/bin/time -v python -m benchmarks.products_scale.partition_phase NODES"""

import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from gnnq.config.compose import compose_config
from gnnq.data.part_cache import prepare_parts
from gnnq.data.partition import is_symmetric_canonical
from gnnq.data.registry import load_dataset
from gnnq.launch.partition_memory import graph_mib, launcher_memory_mib
from gnnq.launch.resources import available_mib, with_held
from gnnq.track.process_memory import rss_mib


def maxrss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


n, nparts = int(sys.argv[1]), 4
cfg = compose_config(
    [
        "dataset=synthetic",
        f"dataset.num_nodes={n}",
        "dataset.avg_degree=50",
        "dataset.feature_dim=100",
        "dataset.num_classes=47",
    ]
)
t = time.perf_counter()
g = load_dataset(cfg.dataset)
print(
    f"generated {g.num_nodes:,} nodes {g.num_edges:,} edges in {time.perf_counter() - t:.1f}s; peak so far "
    f"{maxrss():.0f} MiB"
)
entries = g.num_edges if is_symmetric_canonical(*g.edge_index, g.num_nodes) else 2 * g.num_edges
est = launcher_memory_mib(graph_mib(g), g.num_nodes, entries, g.num_edges, nparts, metis=True)
avail, src = with_held(available_mib(None), None, rss_mib(), "this process")
print(f"launcher estimate {est:.0f} MiB (graph {graph_mib(g):.0f} MiB), available {avail:.0f} MiB ({src})", flush=True)
if est > avail:
    sys.exit("does not fit; not partitioning")
root = Path(tempfile.mkdtemp())
t = time.perf_counter()
entry, meta = prepare_parts(g, "metis", 0, nparts, root)
print(
    f"prepare_parts {time.perf_counter() - t:.1f}s (METIS {meta['partition_time_s']}s); launcher peak "
    f"{maxrss():.0f} MiB; "
    f"edge cut {meta['edge_cut'] / meta['num_edges']:.1%}; inner {meta['inner_nodes']} halo {meta['halo_nodes']}"
)
print("part files MiB", [round((entry / f"part{r}.pt").stat().st_size / 2**20) for r in range(nparts)])
shutil.rmtree(root)
