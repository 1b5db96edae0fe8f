"""Phase-wise RSS of the launcher's data path: generate -> partition -> build parts -> write."""
import sys, time, threading, os, tempfile, shutil
import psutil
from pathlib import Path
proc = psutil.Process()
peak = [0]
stop = False
def sampler():
    while not stop:
        r = proc.memory_info().rss
        if r > peak[0]: peak[0] = r
        time.sleep(0.02)
threading.Thread(target=sampler, daemon=True).start()
import resource
def mark(what, t0):
    print(f"{what:30s} maxrss {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:8.0f} rss {proc.memory_info().rss/2**20:8.0f} MiB  peak {peak[0]/2**20:8.0f} MiB  {time.perf_counter()-t0:6.1f}s", flush=True)
    peak[0] = proc.memory_info().rss
n = int(sys.argv[1]); deg = float(sys.argv[2]); nparts = int(sys.argv[3]) if len(sys.argv) > 3 else 4
from gnnq.config.compose import compose_config
from gnnq.data.registry import load_dataset
t0 = time.perf_counter(); mark("start", t0)
cfg = compose_config(["dataset=synthetic", f"dataset.num_nodes={n}", f"dataset.avg_degree={deg}", "dataset.feature_dim=100", "dataset.num_classes=47"])
t0 = time.perf_counter()
g = load_dataset(cfg.dataset); mark(f"load_dataset E={g.num_edges}", t0)
from gnnq.data.part_cache import prepare_parts
root = Path(tempfile.mkdtemp(dir="/tmp/prod"))
if len(sys.argv) > 4:
    from gnnq.data.partition import partition_nodes
    t0 = time.perf_counter(); a = partition_nodes(g.edge_index, g.num_nodes, nparts, "metis", 0); mark("metis", t0); del a
t0 = time.perf_counter()
entry, meta = prepare_parts(g, "metis", 0, nparts, root); mark("prepare_parts", t0)
print("partition_time_s", meta["partition_time_s"], "halo", meta["halo_nodes"])
shutil.rmtree(root)
