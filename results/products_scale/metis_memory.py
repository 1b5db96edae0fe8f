"""Peak memory of pymetis alone on the synthetic graph: python metis_memory.py NODES rec|kway [AVG_DEGREE]."""
import sys, resource, time, warnings
import numpy as np
warnings.simplefilter("always")
from gnnq.data.loaders.synthetic import generate_sbm
from gnnq.data.partition import metis_adjacency
import pymetis
g = generate_sbm(int(sys.argv[1]), float(sys.argv[3]) if len(sys.argv) > 3 else 50, 47, 4, 0.5, 1.0, 0)
xadj, adj = metis_adjacency(g.edge_index, g.num_nodes)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024
import psutil; rss = psutil.Process().memory_info().rss/2**20
rec = sys.argv[2] == "rec"
t = time.perf_counter()
cut, m = pymetis.part_graph(4, adjacency=pymetis.CSRAdjacency(xadj, adj), options=pymetis.Options(seed=0), recursive=rec, warn_on_copies=True)
print(f"E={adj.size} recursive={rec} maxrss before {base:.0f} rss {rss:.0f} after {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MiB cut {cut} {time.perf_counter()-t:.1f}s")
