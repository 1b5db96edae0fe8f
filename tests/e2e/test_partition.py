"""Partitioning, per-rank parts with halo plans, and the on-disk part cache (real graphs, no mocks).

Here: the real command-line runs and system services; the others are in `tests/unit/test_partition.py`.
"""

from __future__ import annotations

import subprocess
import sys

PEAK_SCRIPT = """
import sys, tempfile
from gnnq.data.loaders.synthetic import generate_sbm
from gnnq.data.part_cache import prepare_parts
from gnnq.launch.partition_memory import graph_mib, launcher_memory_mib
g = generate_sbm(60000, 40.0, 47, 100, 0.5, 1.0, 0)
est = launcher_memory_mib(graph_mib(g), g.num_nodes, g.num_edges, g.num_edges, 4, metis=True)
prepare_parts(g, "metis", 0, 4, tempfile.mkdtemp(dir=sys.argv[1]))
import resource
from gnnq.track.process_memory import peak_rss_mib
children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # METIS runs in a forked child
print(est, max(peak_rss_mib(), children))
"""


def test_launcher_memory_estimate_bounds_the_measured_peak(tmp_path):
    """The estimate checked before partitioning is above the launcher's measured peak, by less than 1.8x
    (60k nodes, 2.4M edges, 100 features: the products-scale shape, 40x smaller; results/products_scale)."""
    out = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    estimate, peak = map(float, out.stdout.split())
    # METIS runs in a forked child (gnnq.data.partition): the larger of the two processes' peaks is a lower bound of
    # what the host held (pages they share count once in it). Measured 1.40x with METIS in the launcher (686 / 489
    # MiB), 1.64x with it in the child (686 / 418 MiB).
    assert peak <= estimate <= 1.8 * peak, (estimate, peak)
