"""Every method declares what tuning may change (gnnq/config/search_space.py), with keys its config has and values in
the Optuna sweeper's syntax; the tuning objective and the seeds rule of gnnq-bench tune."""

from __future__ import annotations

import json

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from gnnq.config import search_space as ss
from gnnq.config.compose import compose_config
from gnnq.config.registry import PARALLEL, QUANTIZERS

# A config each choice composes in (pdADMM-G's strategy and grid codec need the GA-MLP).
CONTEXT = {
    "admm": ["experiment=pdadmm_g"],
    "grid": ["experiment=pdadmm_g_q_gnnq"],
    "minibatch": ["experiment=minibatch"],
    "tensor3d": ["experiment=plexus"],
    "pipeqs": ["experiment=pipeqs_published"],
    "sylvie": ["experiment=sylvie"],
}


@pytest.mark.parametrize(
    ("group", "name", "spaces"),
    [("parallel", c.name, ss.PARALLEL_SPACES) for c in PARALLEL.choices()]
    + [("quantizer", c.name, ss.QUANTIZER_SPACES) for c in QUANTIZERS.choices()],
)
def test_every_registry_entry_declares_a_space_of_keys_it_has(group, name, spaces):
    assert name in spaces, f"{group}={name} declares no search space in gnnq/config/search_space.py"
    cfg = compose_config([*CONTEXT.get(name, []), f"{group}={name}"])
    common = ss.OWN_COMMON.get(cfg.parallel.name, ss.COMMON)
    for key, value in {**common, **spaces[name]}.items():
        assert OmegaConf.select(cfg, key, default="<absent>") != "<absent>", f"{group}={name}: {key} is not a key"
        (override,) = OverridesParser.create().parse_overrides([f"{key}={value}"])
        assert override.is_sweep_override(), f"{key}={value} is not a sweep the Optuna sweeper can search"


def _optuna_distribution(key: str, value: str):
    """What Hydra's Optuna sweeper makes of ``key=value`` (a list choice: its text)."""
    from hydra_plugins.hydra_optuna_sweeper._impl import create_optuna_distribution_from_override

    (override,) = OverridesParser.create().parse_overrides([f"{key}={value}"])
    return create_optuna_distribution_from_override(override)


@pytest.mark.needs_extra("tune")
@pytest.mark.parametrize(
    "space", [*ss.PARALLEL_SPACES.values(), *ss.QUANTIZER_SPACES.values(), ss.COMMON, ss.ADMM_COMMON], ids=str
)
def test_every_space_is_one_the_optuna_sweeper_can_search(space):
    for key, value in space.items():
        assert _optuna_distribution(key, value) is not None, f"{key}={value}"


@pytest.mark.needs_extra("tune")
def test_every_method_of_the_tuned_leaderboard_has_a_space_mini_batch_included_at_one_process():
    """Full-graph vs mini-batch is one table: every method of the sweep composes in it and declares a space; the
    mini-batch reference runs in one process (the sweep's parallel/minibatch.yaml) and tunes its batch and fan-out."""
    from gnnq.bench.tune import sweep_axes
    from gnnq.config.compose import resolve_sweep

    sweep = resolve_sweep("tuned_leaderboard")
    methods = sweep_axes(sweep)["experiment"]
    assert "minibatch" in methods
    for method in methods:
        cfg = compose_config([f"experiment={method}", "dataset=cora"], sweep[1], sweep[0])
        assert ss.search_space(cfg.parallel.name, cfg.quantizer.name), method
        assert cfg.cluster.nproc == (1 if method == "minibatch" else 2), method
    space = ss.search_space("minibatch", "fp32")
    assert {"trainer.lr", "model.dropout", "trainer.weight_decay", "parallel.batch_size", "parallel.fanouts"} <= set(
        space
    )
    # the value a trial gets for a list knob (the choice's text) is an override gnnq composes
    text = _optuna_distribution("parallel.fanouts", space["parallel.fanouts"]).choices[0]
    cfg = compose_config(["experiment=minibatch", "dataset=cora", f"parallel.fanouts={text}"], sweep[1], sweep[0])
    assert list(cfg.parallel.fanouts) == [5]


def test_a_method_without_a_space_fails_naming_it(monkeypatch):
    monkeypatch.delitem(ss.PARALLEL_SPACES, "sancus")
    with pytest.raises(KeyError, match="parallel=sancus declares no search space"):
        ss.search_space("sancus", "fp32")


def test_a_method_space_is_common_plus_its_strategy_and_codec_knobs():
    space = ss.search_space("sampling", "uniform")
    assert set(space) == {*ss.COMMON, "parallel.sampling_rate", "quantizer.bits"}
    assert "trainer.lr" not in ss.search_space("admm", "grid") and "parallel.rho" in ss.search_space("admm", "grid")
    assert ss.overrides({"trainer.lr": "interval(0.001, 0.01)"}) == ["trainer.lr=interval(0.001, 0.01)"]


def test_objective_is_time_to_target_and_an_unreached_target_scores_worse_closer_better(tmp_path):
    from gnnq.bench.tune import UNREACHED_S, FailedTrial, objective

    rows = [
        {"epoch_time_s": 1.0, "overhead_time_s": 2.0 if i == 0 else 0.0, "val": v} for i, v in enumerate([0.5, 0.8])
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ok = {"status": "ok", "best_val": 0.8}
    assert objective(tmp_path, ok, 0.8) == pytest.approx(4.0)  # two epochs and the 2 s overhead
    near, far = objective(tmp_path, ok, 0.85), objective(tmp_path, {**ok, "best_val": 0.6}, 0.85)
    assert UNREACHED_S < near < far
    assert isinstance(objective(tmp_path, {"status": "failed"}, 0.8), FailedTrial)  # Optuna: FAIL, not a score


def test_final_seeds_must_differ_from_the_tuning_seed(capsys):
    from gnnq.bench.tune import main

    rc = main(
        ["--method", "pipegcn", "--dataset", "cora", "--target", "cora=0.7", "--final-seeds", "0,1", "--out", "x"]
    )
    assert rc == 2 and "must differ from the tuning seed 0" in capsys.readouterr().err
