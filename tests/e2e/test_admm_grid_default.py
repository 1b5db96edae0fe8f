"""quantizer=grid with the plain defaults (parallel=admm model=gamlp) trains like fp32: its default grid is gnnq's
[-0.05, 1] with 256 levels. The paper's integers -1..20 (the old default, now experiment=pdadmm_g_q_paper's) reached
test 0.319 on Cora under gnnq's ADMM start, against 0.759 in fp32."""

from __future__ import annotations

import pytest

from gnnq.config.compose import compose_config
from tests.cli_helpers import read_record, run_dirs, run_gnnq

PLAIN = ["dataset=cora", "model=gamlp", "parallel=admm", "cluster.nproc=2", "logger=none"]


def test_the_default_grid_is_gnnqs_and_the_paper_preset_keeps_the_papers():
    plain = compose_config(["model=gamlp", "parallel=admm", "quantizer=grid"]).quantizer
    assert (plain.grid_min, plain.grid_max, plain.grid_levels) == (-0.05, 1.0, 256)
    paper = compose_config(["experiment=pdadmm_g_q_paper"]).quantizer
    assert (paper.grid_min, paper.grid_max, paper.grid_levels) == (-1.0, 20.0, 22)


@pytest.mark.slow
def test_plain_grid_composition_trains_within_one_point_of_fp32(tmp_path, planetoid_root):
    tests = {}
    for quantizer in ("fp32", "grid"):
        res = run_gnnq([*PLAIN, f"quantizer={quantizer}", "trainer.epochs=40"], tmp_path / quantizer, planetoid_root)
        assert res.returncode == 0, res.stderr[-2000:]
        (run_dir,) = run_dirs(tmp_path / quantizer)
        tests[quantizer] = read_record(run_dir)["test"]
    assert tests["fp32"] > 0.7, tests
    assert abs(tests["grid"] - tests["fp32"]) <= 0.01, tests
