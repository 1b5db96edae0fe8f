"""Peak memory of pymetis alone on the synthetic graph (4 features: the graph is mostly its edges).

Usage: python -m benchmarks.products_scale.metis_memory NODES rec|kway [AVG_DEGREE]
Prints the resident memory before METIS and the process's peak after it (MiB); METIS's own share is the
difference (the generation's earlier peak is below it)."""

import resource
import sys
import time
import warnings

import psutil
import pymetis

from gnnq.data.loaders.synthetic import generate_sbm
from gnnq.data.partition import metis_adjacency

warnings.simplefilter("always")  # pymetis warns when it copies its input (warn_on_copies)
g = generate_sbm(int(sys.argv[1]), float(sys.argv[3]) if len(sys.argv) > 3 else 50, 47, 4, 0.5, 1.0, 0)
xadj, adj = metis_adjacency(g.edge_index, g.num_nodes)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rss = psutil.Process().memory_info().rss / 2**20
rec = sys.argv[2] == "rec"
t = time.perf_counter()
options = pymetis.Options(seed=0)
cut, _ = pymetis.part_graph(
    4, adjacency=pymetis.CSRAdjacency(xadj, adj), options=options, recursive=rec, warn_on_copies=True
)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(
    f"E={adj.size} recursive={rec} maxrss before {base:.0f} rss {rss:.0f} after {after:.0f} MiB cut {cut} "
    f"{time.perf_counter() - t:.1f}s"
)
