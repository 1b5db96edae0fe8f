"""Load time and peak memory of reading one bring-your-own graph (``dataset=files``), each in a fresh process.

    python -m benchmarks.sparse_load DIR [DIR ...] [--repeats 3]

Per directory: the seconds ``gnnq.data.loaders.files.load_files`` takes (median over repeats) and the process's
peak resident memory after it (max over repeats), as one JSON line each (e.g. the dense and sparse forms
benchmarks.wide_sparse_graph writes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """
import json, resource, sys, time
from gnnq.data.loaders.files import load_files
t0 = time.perf_counter()
g = load_files(sys.argv[1], 0.6, 0.2, 0)
g.validate()
fp = g.fingerprint()
s = time.perf_counter() - t0
print(json.dumps({"load_s": s, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "sparse": g.sparse_features, "nodes": g.num_nodes, "features": g.num_features}))
"""


def measure(path: str, repeats: int) -> dict:
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", CHILD, path], check=True, capture_output=True, text=True).stdout
        )
        for _ in range(repeats)
    ]
    return {
        "path": path,
        "sparse": runs[0]["sparse"],
        "load_s_median": statistics.median(r["load_s"] for r in runs),
        "peak_rss_mib_max": max(r["peak_rss_mib"] for r in runs),
        "repeats": repeats,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args(argv)
    for d in a.dirs:
        print(json.dumps(measure(d, a.repeats)), flush=True)


if __name__ == "__main__":
    main()
