"""``sweep=adaqp_paper`` end to end: its points listed, run through the real loaders on small files in each dataset's
real on-disk format (tests/data_fixtures.py), 2 ranks, 2 epochs, and its table rendered with the paper's columns.

Every (dataset, method) pair of the sweep runs, and every method under both models: Reddit and ogbn-products with
GCN, Yelp and AmazonProducts with GraphSAGE (28 of the 56 distinct points at 2 ranks; the other 28 change only the
model on a dataset, and are composed by the dry run). The partition axis changes only cluster.nproc, fixed to 2 here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from gnnq.config.compose import SWEEPS_DIR
from gnnq.report.summary import find_records
from gnnq.report.tables import _header_and_rows, _matches, build_table, load_spec
from tests.cli_helpers import read_metrics, run_dirs, run_gnnq
from tests.data_fixtures import FIXTURE_ENV, write_adaqp_datasets

METHODS = 7
SHRUNK = ["cluster.nproc=2", "trainer.epochs=2", "trainer.eval_every=1", "adaqp_paper/partitions@_global_=fewer"]
# The sweep the test runs: sweeps/adaqp_paper.yaml (and its groups) copied, plus one default: its adaptive points
# cycle every epoch (the published cycles are longer than 2 epochs) and profile each size once. A command-line
# quantizer.* key would reach its fp32 points too, which have no such key.
FIXTURE_DEFAULT = "  - optional fixture/quantizer@quantizer: ${quantizer}\n"
ADAPTIVE = "assign_cycle: 1\ngroup_size: 20\nprofile_repeats: 1\n"
HALVES = [("reddit,ogbn-products", "gcn"), ("yelp,amazon-products", "sage")]


def test_dry_run_lists_every_point(tmp_path):
    res = run_gnnq(["-m", "sweep=adaqp_paper", "--dry-run"], tmp_path / "runs", tmp_path / "data", timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    out = res.stdout + res.stderr
    assert f"{4 * 2 * 2 * METHODS} point(s)" in out  # datasets x models x partition counts x methods
    assert "dataset=amazon-products model=sage adaqp_paper/partitions@_global_=more experiment=adaqp_published" in out


@pytest.mark.timeout(2400)  # 28 runs of 2 ranks, about 14 s of CPU time each (measured on the shared machine)
def test_every_dataset_and_method_trains_on_real_formats_and_renders(tmp_path):
    data = write_adaqp_datasets(tmp_path / "data")
    sweep = tmp_path / "sweep" / "adaqp_paper.yaml"
    shutil.copytree(SWEEPS_DIR / "adaqp_paper", sweep.parent / "adaqp_paper")
    text = (SWEEPS_DIR / "adaqp_paper.yaml").read_text()
    assert text.count("  - _self_\n") == 1
    sweep.write_text(text.replace("  - _self_\n", FIXTURE_DEFAULT + "  - _self_\n"))
    (sweep.parent / "fixture" / "quantizer").mkdir(parents=True)
    (sweep.parent / "fixture" / "quantizer" / "adaptive.yaml").write_text(ADAPTIVE)
    runs = tmp_path / "runs"
    for datasets, model in HALVES:
        args = ["-m", f"sweep={sweep}", f"dataset={datasets}", f"model={model}", *SHRUNK]
        res = run_gnnq(args, runs / model, data, env=FIXTURE_ENV, timeout=1800)
        assert res.returncode == 0, res.stderr[-3000:]
    dirs = run_dirs(runs)
    assert len(dirs) == 4 * METHODS
    records = [json.loads((d / "record.json").read_text()) for d in dirs]
    for d, rec in zip(dirs, records):
        assert rec["status"] == "ok", (d, rec.get("error"))
        assert [m["epoch"] for m in read_metrics(d) if "epoch" in m][-1] == 2
        assert rec["world_size"] == 2 and rec["test"] is not None
    spec = load_spec(SWEEPS_DIR / "adaqp_paper.table.yaml")
    for row in spec["rows"]:  # each method once on each dataset
        datasets = sorted(r["config"]["dataset"]["name"] for r in records if _matches(r, row["match"]))
        assert datasets == ["amazon-products", "ogbn-products", "reddit", "yelp"], (row["label"], datasets)
    published = [r for r in records if r["config"]["quantizer"].get("solver") == "milp"]
    assert len(published) == 4 and all(r["config"]["quantizer"]["profile_range"] == "published" for r in published)
    for rec in published:  # AdaQP's 200 profiled sizes, one fitted sample each per channel
        assert [row["samples"] for row in rec["summary"]["adaptive"]["time_model"]] == [200, 200]
    # the table, once per model, with the paper's column beside each of ours
    found = [r for _, r in find_records([runs])[0]]
    for model, filled in (("gcn", ("Reddit", "products")), ("sage", ("Yelp", "AmazonProducts"))):
        mine = [r for r in found if r["config"]["model"]["name"] == model]
        headers, rows = _header_and_rows(spec, build_table(spec, mine))
        assert len(rows) == METHODS and all(h.endswith("(paper)") for h in headers[2::2])
        for j, header in enumerate(headers[1:], start=1):
            if header.endswith("(paper)"):
                assert all(row[j] == "-" for row in rows)
            elif header.split()[0] in filled:
                assert all(row[j] != "-" for row in rows), (model, header, rows)
            else:
                assert all(row[j] == "-" for row in rows)
    res = run_gnnq_report(runs / "gcn", tmp_path / "out")
    assert res.returncode == 0, res.stderr[-2000:]
    md = (tmp_path / "out" / "adaqp_paper.md").read_text()
    assert "Reddit speedup (paper)" in md and "AdaQP (published)" in md and "3.01x" in md


def run_gnnq_report(runs, out) -> subprocess.CompletedProcess:
    """``gnnq-report RUNS --table adaqp_paper --out OUT`` (the console script's entry point)."""
    code = "import sys; from gnnq.cli import report_main; sys.argv[0] = 'gnnq-report'; report_main()"
    cmd = [sys.executable, "-c", code, str(runs), "--table", "adaqp_paper", "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)
