"""A run whose parts are cached is planned without loading its dataset or importing torch (issue 29 item 1):
the launcher's prepare_data, twice, in fresh processes (the second one reads the dataset summary and the
partition cache only)."""

from __future__ import annotations

import json
import subprocess
import sys

PLAN = """
import sys
from gnnq.config.compose import compose_config
from gnnq.launch import prepare as job  # the "prepare data" step of run_job
cfg = compose_config(["dataset.num_nodes=400", "cluster.nproc=2", "logger=none", "dataset.root={root}"])
loaded = []
real = job.load_dataset
job.load_dataset = lambda *a, **k: loaded.append(1) or real(*a, **k)
parts, meta = job.prepare_data(cfg)
print(len(loaded), "torch" in sys.modules, "torch_geometric" in sys.modules, parts)
"""


def test_a_run_whose_parts_are_cached_is_planned_without_loading_or_torch(tmp_path):
    def plan() -> list[str]:
        res = subprocess.run(
            [sys.executable, "-c", PLAN.format(root=tmp_path)], capture_output=True, text=True, timeout=240
        )
        assert res.returncode == 0, res.stderr
        return res.stdout.split()[-4:]

    first = plan()
    assert first[:2] == ["1", "True"]  # loaded, partitioned (METIS and the part files need torch)
    again = plan()
    assert again == ["0", "False", "False", first[3]]  # the same parts, from the cache alone
    (summary,) = (tmp_path / "parts" / "graphs").glob("*.json")
    assert json.loads(summary.read_text())["num_nodes"] == 400
