"""Every method (model, quantizer's codec family, parallel strategy or trainer) is one registry line whose parts all
resolve: its schema, its conf file, its implementation with its construction and resources, its trainer (parallel)
and the names its needs and labels refer to. A line that lacks a part fails here, naming the entry and the part."""

from __future__ import annotations

import dataclasses
import inspect
import typing

import pytest
from omegaconf import OmegaConf

from gnnq.config import schema as s
from gnnq.config.compose import CONF_DIR
from gnnq.config.method import Resources
from gnnq.config.registry import FULL_GRAPH_TRAINER, METHODS, Choice, Needs, group_registries, resolve


def _resolved(ref):
    try:
        return resolve(ref)
    except (ImportError, AttributeError):
        return None


def _takes_the_trainer_signature(trainer) -> bool:
    from gnnq.train.driver import TrainFn

    wanted = [p for p in inspect.signature(TrainFn.__call__).parameters if p != "self"]
    return list(inspect.signature(trainer).parameters) == wanted


def missing_parts(group: str, choice: Choice) -> list[str]:
    """The parts of ``group``'s entry ``choice`` that are absent or do not resolve (empty: complete)."""
    missing = []
    base = typing.get_type_hints(s.Config)[group]
    if not (dataclasses.is_dataclass(choice.schema) and issubclass(choice.schema, base)):
        missing.append("schema")
    conf = CONF_DIR / group / f"{choice.name}.yaml"
    if not conf.is_file() or OmegaConf.load(conf).get("name") != choice.name:
        missing.append("conf")
    if not choice.about:
        missing.append("about")
    target = _resolved(choice.target)
    if target is None:
        missing.append("target")
    full_graph = group == "parallel" and choice.trainer == FULL_GRAPH_TRAINER
    if group != "parallel" or full_graph:  # a strategy, model or codec family builds itself from its config node
        if not callable(getattr(target, "from_config", None)):
            missing.append("from_config")
    if group == "parallel":  # its trainer (minibatch, admm: the trainer is the construction)
        trainer = _resolved(choice.trainer) if choice.trainer else None
        if trainer is None or not _takes_the_trainer_signature(trainer):
            missing.append("trainer")
    # declared on the registry line itself (the launcher reads it without importing the class): no entry gets a
    # default unnoticed (a strategy that keeps halo buffers but says nothing would get sync's estimate), and no
    # class declares a second, diverging copy
    if not isinstance(choice.resources, Resources) or "resources" in dir(target):
        missing.append("resources")
    registries = group_registries()
    for need in choice.needs:
        if need.group not in registries or not set(need.allowed) <= set(registries[need.group].names()) or not need.why:
            missing.append(f"needs[{need.group}]")
    if not set(choice.labels) <= set(registries["quantizer"].names()):
        missing.append("labels")
    return missing


ENTRIES = [(group, choice) for group, registry in METHODS.items() for choice in registry.choices()]


@pytest.mark.parametrize("group,choice", ENTRIES, ids=[f"{g}={c.name}" for g, c in ENTRIES])
def test_every_method_entry_resolves_every_part(group, choice):
    missing = missing_parts(group, choice)
    assert not missing, f"{group}={choice.name} lacks: {', '.join(missing)}"


def test_the_method_groups_are_the_registries_with_implementations():
    assert set(METHODS) == {"model", "quantizer", "parallel"}
    assert all(METHODS[g] is group_registries()[g] for g in METHODS)


class _BuildsButDeclaresNothing:
    @classmethod
    def from_config(cls, pcfg, exchange, graph, x_inner, seed):
        return cls()


class _DeclaresItsOwn(_BuildsButDeclaresNothing):
    @classmethod
    def resources(cls, pcfg):
        return Resources(halo_buffers=True)


def test_an_entry_lacking_a_part_is_caught_and_named():
    from gnnq.parallel.sync import SyncStrategy

    silent = Choice("stale", s.StaleParallelConfig, SyncStrategy, "a strategy with no resources", FULL_GRAPH_TRAINER)
    assert missing_parts("parallel", silent) == ["resources"]
    no_resources = Choice("fake", s.StaleParallelConfig, _BuildsButDeclaresNothing, "no resources", FULL_GRAPH_TRAINER)
    assert missing_parts("parallel", no_resources) == ["conf", "resources"]
    second_copy = Choice(
        "stale", s.StaleParallelConfig, _DeclaresItsOwn, "a copy", FULL_GRAPH_TRAINER, resources=Resources()
    )
    assert missing_parts("parallel", second_copy) == ["resources"]
    no_target = Choice(
        "stale",
        s.StaleParallelConfig,
        "gnnq.parallel.stale:NoSuchStrategy",
        "a name",
        FULL_GRAPH_TRAINER,
        resources=Resources(),
    )
    assert missing_parts("parallel", no_target) == ["target", "from_config"]
    no_trainer = Choice(
        "stale", s.StaleParallelConfig, "gnnq.parallel.stale:StaleStrategy", "a name", resources=Resources()
    )
    assert missing_parts("parallel", no_trainer) == ["trainer"]
    needs = (Needs("parallel", ("admm", "pipeline"), "why"),)
    bad_needs = Choice(
        "grid", s.GridQuantizerConfig, "gnnq.comm.grid_codec:GridMessages", "grid", needs=needs, resources=Resources()
    )
    assert missing_parts("quantizer", bad_needs) == ["needs[parallel]"]
    wrong_schema = Choice(
        "uniform", s.ParallelConfig, "gnnq.comm.codec:UniformMessages", "uniform", resources=Resources()
    )
    assert missing_parts("quantizer", wrong_schema) == ["schema"]
