"""One registry per config group: it matches conf/, validate and the dispatch, and another option's keys are refused.

Here: the in-process cases (no process started); the others are in `tests/integration/test_registries.py`.
"""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from gnnq.config.compose import CONF_DIR, compose_config
from gnnq.config.registry import OPTIMIZERS, PARALLEL, group_registries, registries
from gnnq.config.typed import load_run_config, typed_config
from gnnq.config.validate import ALLOWED, allowed_values
from gnnq.errors import ConfigError

CONF = CONF_DIR


@pytest.mark.parametrize("group", list(group_registries()))
def test_every_registry_name_has_a_conf_file_and_every_file_names_a_registry_choice(group):
    registry = group_registries()[group]
    files = {p.stem: OmegaConf.load(p) for p in (CONF / group).glob("*.yaml")}
    assert set(registry.names()) <= set(files), f"conf/{group}/ lacks {set(registry.names()) - set(files)}"
    for stem, data in files.items():
        assert data.name in registry, f"conf/{group}/{stem}.yaml names {data.name!r}, not one of {registry.names()}"
        # the file builds on its choice's schema, so the defaults are the dataclass's
        assert f"/schema/{group}/{data.name}@_here_" in list(data.defaults), f"conf/{group}/{stem}.yaml"


@pytest.mark.parametrize("group", list(group_registries()))
def test_conf_files_of_a_registry_name_hold_no_value_equal_to_the_schema_default(group):
    registry = group_registries()[group]
    for name in registry.names():
        data = OmegaConf.to_container(OmegaConf.load(CONF / group / f"{name}.yaml"))
        defaults = OmegaConf.to_container(OmegaConf.structured(registry.schema(name)))
        same = [k for k, v in data.items() if k not in ("name", "defaults") and defaults.get(k) == v]
        assert not same, f"conf/{group}/{name}.yaml repeats the defaults of {same} (they live in gnnq/config/schema.py)"


def test_validate_allows_exactly_the_registry_names():
    allowed = allowed_values()
    for key, registry in registries().items():
        assert allowed[key] == registry.names(), key
    assert not {k for k in ALLOWED if k.endswith(".name") or k == OPTIMIZERS.key}, (
        "group names come from the registries"
    )
    assert allowed["cluster.name"] == ("local", "emulated", "slurm", "multinode")


def test_every_choice_dispatches_to_something_importable():
    import torch

    for registry in [*group_registries().values(), OPTIMIZERS]:
        for choice in registry.choices():
            if choice.target is not None:
                assert registry.target(choice.name) is not None, (registry.key, choice.name)
    assert OPTIMIZERS.target("adagrad") is torch.optim.Adagrad
    for name in PARALLEL.names():
        assert callable(PARALLEL.trainer(name)), name
    from gnnq.parallel import STRATEGIES, SamplingStrategy

    assert STRATEGIES["sampling"] is SamplingStrategy and set(STRATEGIES) == {
        "sync",
        "overlap",
        "stale",
        "sampling",
        "sancus",
        "pipeqs",
        "sylvie",
    }


# --- a key of another option: one line naming the option and its keys ---------------------------------

OTHER_OPTION = {
    "dataset=cora with a synthetic key": (
        ["dataset=cora", "dataset.num_nodes=500"],
        "dataset.num_nodes: no such key for dataset=cora; allowed keys: name, root, download, to_undirected",
    ),
    "appended synthetic key": (
        ["dataset=cora", "+dataset.num_nodes=500"],
        "dataset.num_nodes: no such key for dataset=cora; allowed keys: name, root, download, to_undirected",
    ),
    "sampling key with sync": (
        ["parallel.sampling_rate=0.5"],
        "parallel.sampling_rate: no such key for parallel=sync; allowed keys: name, inputs",
    ),
    "stale key with sampling": (
        ["parallel=sampling", "parallel.momentum=0.5"],
        "parallel.momentum: no such key for parallel=sampling; allowed keys: name, inputs, sampling_rate, sample_size",
    ),
    "adaptive key with uniform": (
        ["quantizer=uniform", "quantizer.assign_cycle=5"],
        "quantizer.assign_cycle: no such key for quantizer=uniform; allowed keys: name, bits, grad_bits, "
        "param_dtype, quantize_input, nonfinite",
    ),
    "uniform key with fp32": (
        ["quantizer.bits=8"],
        "quantizer.bits: no such key for quantizer=fp32; allowed keys: name",
    ),
    "gamlp key with gcn": (
        ["model.hops=2"],
        "model.hops: no such key for model=gcn; allowed keys: name, layers, hidden, dropout, norm, layer_order",
    ),
    "emulated key with local": (
        ["cluster.link=10gbit"],
        "cluster.link: no such key for cluster=local; allowed keys: name, nproc, hosts, backend, device, timeout_s, "
        "threads_per_rank, allow_oversubscribe, memory_limit_gib",
    ),
}


@pytest.mark.parametrize("overrides,expected", OTHER_OPTION.values(), ids=OTHER_OPTION.keys())
def test_a_key_of_another_option_is_one_line_naming_the_option_and_its_keys(overrides, expected):
    with pytest.raises(ConfigError) as excinfo:
        compose_config(overrides)
    assert str(excinfo.value) == expected


def test_a_name_alone_does_not_switch_the_option():
    with pytest.raises(ConfigError) as excinfo:
        compose_config(["parallel.name=stale"])
    assert "parallel=stale" in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_a_composed_group_holds_only_its_options_keys():
    cfg = compose_config(["dataset=cora", "experiment=bnsgcn"])
    assert set(cfg.dataset) == {"name", "root", "download", "to_undirected"}
    assert dict(cfg.parallel) == {"name": "sampling", "inputs": "once", "sampling_rate": 0.1, "sample_size": "floor"}
    assert set(cfg.quantizer) == {"name"}
    gamlp = compose_config(["model=gamlp"]).model
    assert (gamlp.layers, gamlp.hidden, gamlp.dropout, gamlp.norm, gamlp.hops) == (
        10,
        500,
        0.0,
        "none",
        4,
    )  # the dataclass's


def test_the_worker_config_is_typed_and_read_only(tmp_path):
    cfg = compose_config(["dataset=cora", "experiment=pipegcn_smoothed"])
    path = tmp_path / "config.yaml"
    path.write_text(OmegaConf.to_yaml(OmegaConf.to_container(cfg, resolve=True)))
    loaded = load_run_config(path)
    assert loaded == cfg
    assert OmegaConf.get_type(loaded.parallel).__name__ == "StaleParallelConfig"
    with pytest.raises(Exception, match="read-only|ReadonlyConfigError"):
        loaded.parallel.momentum = 0.5
    with pytest.raises(Exception, match="num_nodes"):
        typed_config({"dataset": {"name": "cora", "num_nodes": 5}})


def test_the_schema_of_every_choice_is_a_dataclass_extending_its_groups_base():
    import typing

    from gnnq.config.schema import Config

    bases = typing.get_type_hints(Config)
    for group, registry in group_registries().items():
        for choice in registry.choices():
            assert dataclasses.is_dataclass(choice.schema) and issubclass(choice.schema, bases[group]), (
                group,
                choice.name,
            )


def test_peer_options_reach_their_strategies():
    """Each peer option of the config is the strategy's (make_strategy passes it on; one rank, no peers)."""
    import torch

    from gnnq.comm import Communicator, HaloExchange
    from gnnq.comm.direction import Direction
    from gnnq.models.graph_ops import LocalGraph
    from gnnq.parallel import make_strategy

    def built(overrides):
        cfg = compose_config(overrides)
        exchange = HaloExchange(Communicator(), torch.zeros(0, dtype=torch.int64), [0], [0])
        graph = LocalGraph(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.ones(2), 2)
        return make_strategy(cfg.parallel, exchange, graph, torch.zeros(2, 3), seed=0)

    stale = built(["parallel=stale", "parallel.warmup=zeros", "parallel.momentum=0.5", "parallel.smooth=gradients"])
    assert (stale.warmup, stale.momentum, stale.smoothed) == ("zeros", 0.5, (Direction.BACKWARD,))
    assert built(["parallel=sampling", "parallel.sample_size=floor"]).sample_size == "floor"
    sancus = built(["parallel=sancus", "parallel.threshold=0.25", "parallel.max_staleness=7"])
    assert (sancus.threshold, sancus.max_staleness) == (0.25, 7)
    assert built(["experiment=pipegcn"]).warmup == "zeros" and built(["experiment=bnsgcn"]).sample_size == "floor"
