"""Property-based tests (hypothesis) over the config space: gnnq.config.compose.compose_config either
returns a config that gnnq.config.validate accepted, or raises ConfigError with one line naming the key
or group at fault; never another exception. And every allowed combination of group options composes.

Options come from the real conf/<group>/*.yaml files, the registries and validate.py's allowed_values() /
all_bounds() (the schema fields' bounds), so new options and keys are covered without editing this file.
Runs are derandomized.
"""

from __future__ import annotations

import itertools
import math
import re
import typing
from dataclasses import fields, is_dataclass
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from gnnq.config import compose as compose_module
from gnnq.config.compose import CONF_DIR, compose_config
from gnnq.config.registry import choice_schema, group_registries
from gnnq.config.schema import Bounds, Config
from gnnq.config.validate import all_bounds, allowed_values, validate
from gnnq.errors import ConfigError

CONF = CONF_DIR
GROUPS = ("dataset", "model", "quantizer", "parallel", "partitioner", "cluster", "logger")
OPTIONS = {g: sorted(p.stem for p in (CONF / g).glob("*.yaml")) for g in GROUPS}


def _leaf_types() -> dict[str, type]:
    """Every schema key ("group.key") of any group option, with its declared type, Optional and List unwrapped."""
    out = {}
    hints = typing.get_type_hints(Config)
    for group in fields(Config):
        node = hints[group.name]
        if not is_dataclass(node):
            continue
        registry = group_registries().get(group.name)
        for cls in {registry.schema(n) for n in registry.names()} if registry else {node}:
            out |= _leaves_of(group.name, cls)
    return out


def _leaves_of(prefix: str, cls: type) -> dict[str, type]:
    """The leaf keys of dataclass ``cls`` under ``prefix``, nested dataclasses (trainer.grad_sync) expanded."""
    out = {}
    for key, hint in typing.get_type_hints(cls).items():
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        typ = args[0] if typing.get_origin(hint) is typing.Union else hint
        if typing.get_origin(hint) in (list, typing.List):
            out[f"{prefix}.{key}"] = list
        elif is_dataclass(typ):
            out |= _leaves_of(f"{prefix}.{key}", typ)
        else:
            out[f"{prefix}.{key}"] = typ
    return out


def option_keys(group: str, option: str) -> set[str]:
    """The keys ("group.key") the group has with ``option`` (conf/<group>/<option>.yaml) chosen."""
    name = OmegaConf.load(CONF / group / f"{option}.yaml").name
    return {f"{group}.{f.name}" for f in fields(choice_schema(group, name))}


LEAVES = _leaf_types()
ALLOWED = allowed_values()
BOUNDS = all_bounds()
SETTINGS = dict(derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- rendering values as Hydra command-line overrides --------------------------------------


def render(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if math.isnan(value)
            else ("inf" if value == math.inf else ("-inf" if value == -math.inf else repr(value)))
        )
    if isinstance(value, list):
        return "[" + ",".join(render(v) for v in value) + "]"
    return str(value)


# Values of the wrong type or syntax for (almost) any key, including Hydra and OmegaConf specials.
WRONG = [
    "abc",
    "1.5",
    "true",
    "[1,2]",
    "[]",
    "null",
    "nan",
    "inf",
    "-inf",
    "''",
    "{a: 1}",
    "${nope}",
    "???",
    "1e3",
    "-0",
    "${oc.env:GNNQ_TEST_UNSET_VARIABLE}",
    "a b",
    "x,",
    "'quoted'",
    "[a",
    "${trainer.lr}",
    "1_000",
]


def _number(key: str, typ: type) -> st.SearchStrategy:
    """Numbers at, just beyond and between the key's bounds (or a generic range without bounds)."""
    bounds = BOUNDS.get(key, Bounds())
    low, high = bounds.low, bounds.high
    edges = [b for b in (low, high) if b is not None]
    if typ is int:
        points = [e + d for e in edges for d in (-1, 0, 1)] + [0, -1, 2**31, 2**63]
        return st.sampled_from(points) | st.integers(min_value=-5, max_value=300)
    points = [float(e) + d for e in edges for d in (-1e-9, 0.0, 1e-9, -1.0, 1.0)] + [0.0, -1.0]
    spread = st.floats(
        min_value=(low if low is not None else -10.0) - 2.0, max_value=(high if high is not None else 100.0) + 2.0
    )
    return st.sampled_from(points) | spread | st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 5e-324])


def value_for(key: str) -> st.SearchStrategy[str]:
    typ = LEAVES[key]
    choices = [st.sampled_from(WRONG)]
    if key in ALLOWED:
        choices.append(st.sampled_from(ALLOWED[key] + ("", "nope", "GCN", "fp16", "local ")))
    if typ in (int, float):
        choices.append(_number(key, typ))
    elif typ is bool:
        choices.append(st.booleans())
    elif typ is list:
        choices.append(st.lists(st.integers(min_value=-2, max_value=40), max_size=4))
    else:
        choices.append(st.text(alphabet="abcXYZ019_-./:,=[]{}'\"$\\ ", max_size=8))
    return st.one_of(choices).map(lambda v: v if isinstance(v, str) else render(v))


KEYS = sorted(set(LEAVES) | set(ALLOWED) | set(BOUNDS))


@st.composite
def key_override(draw) -> str:
    key = draw(st.sampled_from(KEYS))
    prefix = draw(st.sampled_from(["", "", "", "+", "++"]))
    return f"{prefix}{key}={draw(value_for(key))}"


@st.composite
def group_override(draw) -> str:
    group = draw(st.sampled_from(GROUPS))
    option = draw(st.sampled_from(OPTIONS[group] + ["nope", "GCN", ""]))
    return draw(st.sampled_from([f"{group}={option}", f"{group}={option}", f"~{group}"]))


unknown_override = st.sampled_from(
    ["trainer.epochz=3", "+trainer.epochz=3", "foo=1", "+foo=1", "model.layers.x=1", "~model.hidden"]
)
any_override = st.one_of(key_override(), key_override(), group_override(), group_override(), unknown_override)


def _named(override: str, alone: bool) -> list[str]:
    """What an error caused (in part) by ``override`` must name (one of): its key, or its group (group.x, group=x).

    An override given ``alone`` on a key must be named by that key (or a parent key: ``model.layers`` for
    ``model.layers.x``), except ``<group>.name``, where the group's file holds values for another option.
    """
    key = override.split("=", 1)[0].lstrip("+~")
    parts = key.split(".")
    if alone and len(parts) > 1 and parts[-1] != "name":
        return [".".join(parts[:i]) for i in range(2, len(parts) + 1)]
    return [key, f"{parts[0]}.", f"{parts[0]}="]


def _compose_checked(overrides: list[str]):
    """compose_config, asserting it validated what it returned; returns (cfg, None) or (None, message)."""
    with mock.patch.object(compose_module, "validate", wraps=validate) as spy:
        try:
            cfg = compose_config(overrides)
        except ConfigError as exc:
            msg = str(exc)
            assert msg.strip() and "\n" not in msg and "\r" not in msg, f"not one line for {overrides}: {msg!r}"
            assert "Traceback" not in msg
            return None, msg
    spy.assert_called_once()
    validate(cfg)  # what came back is accepted as it is
    return cfg, None


@pytest.mark.slow  # hypothesis: 120 compositions, about 25 s
@settings(max_examples=120, **SETTINGS)
@example(["cluster.backend=x,"])  # found by this test: Hydra's parse error named neither override nor key
@example(["trainer.epochs=3", "model.hidden=[a"])
@given(st.one_of(st.lists(any_override, min_size=1, max_size=5), any_override.map(lambda o: [o])))
def test_any_overrides_compose_or_fail_with_one_line_naming_the_key(overrides):
    cfg, msg = _compose_checked(overrides)
    event("composed" if msg is None else "rejected")
    if msg is not None:
        names = [n for o in overrides for n in _named(o, alone=len(overrides) == 1)]
        assert any(n in msg for n in names), f"{msg!r} names none of {overrides}"


# --- group options: allowed combinations compose, the others are rejected naming a group ----------


HOSTS = {
    c: compose_config(
        [f"cluster={c}", "cluster.rendezvous=n:1"] if c == "multinode" else [f"cluster={c}"]
    ).cluster.hosts
    for c in OPTIONS["cluster"]
}
HOSTS["multinode"] = 1  # choice_overrides pins it


def single_host(choice: dict) -> dict:
    """``choice`` on a one-host cluster if its own cluster makes it conflict (parallel=minibatch runs one process)."""
    return choice | {"cluster": "local"} if conflicts(choice) else choice


def conflicts(choice: dict) -> set[str]:
    """Groups (and keys) in a combination that validate.py forbids (_check_gamlp, _check_parallel)."""
    m, p, q, nproc = choice["model"], choice["parallel"], choice["quantizer"], choice["cluster.nproc"]
    ranks = nproc * HOSTS[choice.get("cluster", "local")]
    bad = set()
    if q == "grid" and p != "admm":
        bad |= {"quantizer", "parallel"}
    if p == "admm" and m != "gamlp":
        bad |= {"parallel", "model"}
    if p == "admm" and q not in ("fp32", "grid"):
        bad |= {"parallel", "quantizer"}
    if m == "gamlp" and p not in ("sync", "admm"):
        bad |= {"parallel", "model"}
    if m == "gamlp" and p == "sync" and q != "fp32":
        bad |= {"quantizer", "model"}
    if p in ("sampling", "sancus") and q == "adaptive":
        bad |= {"parallel", "quantizer"}
    if p == "tensor3d" and (m != "gcn" or q not in ("fp32", "uniform")):
        bad |= {"parallel", "model" if m != "gcn" else "quantizer"}
    if p in ("pipeqs", "sylvie") and q != "uniform":  # their widths are the uniform codec's
        bad |= {"parallel", "quantizer"}
    if p == "minibatch" and ranks != 1:
        bad |= {"parallel", "cluster.nproc"}
    if p == "minibatch" and q != "fp32":
        bad |= {"parallel", "quantizer"}
    return bad


group_choice = st.fixed_dictionaries(
    {**{g: st.sampled_from(OPTIONS[g]) for g in GROUPS}, "cluster.nproc": st.integers(min_value=1, max_value=3)}
)


def choice_overrides(choice: dict) -> list[str]:
    out = [f"{k}={v}" for k, v in choice.items()]
    if choice["dataset"] == "files":
        out.append("dataset.path=/tmp/gnnq-no-such-dir")  # only its presence is checked before loading
    if choice["cluster"] == "multinode":  # its rendezvous is required; one host keeps the conflicts above about nproc
        out += ["cluster.rendezvous=node1:29400", "cluster.hosts=1"]
    if choice["parallel"] == "tensor3d":  # its GCN has no normalization layer (model.norm=layer is refused)
        out.append("model.norm=none")
    return out


@pytest.mark.slow  # hypothesis: 80 compositions, about 30 s
@settings(max_examples=80, **SETTINGS)
@given(group_choice)
def test_group_combinations_compose_exactly_when_allowed(choice):
    cfg, msg = _compose_checked(choice_overrides(choice))
    bad = conflicts(choice)
    if not bad:
        assert msg is None, f"{choice} is allowed but was rejected: {msg}"
        for group in GROUPS:
            assert cfg[group].name == OmegaConf.load(CONF / group / f"{choice[group]}.yaml").name
    else:
        assert msg is not None, f"{choice} composed but {sorted(bad)} conflict"
        assert any(re.search(rf"\b{re.escape(b)}[.=]", msg) or b in msg for b in bad), (
            f"{msg!r} names none of {sorted(bad)}"
        )


# Keys whose every in-range value is allowed whatever the other keys hold (no cross-constraint).
CROSS = {
    "dataset.num_nodes",
    "dataset.num_classes",
    "dataset.train_frac",
    "dataset.val_frac",
    "model.layers",
    "model.dropout",
    "model.norm",
    "trainer.epochs",
    "trainer.eval_every",
    "cluster.nproc",
    "cluster.hosts",
    "parallel.rho",
    "parallel.rho_max",
    "cluster.backend",
    "cluster.link",
    "cluster.jitter_ms",  # these three: cluster=emulated (_check_emulated)
    "trainer.checkpoint_every",
    "trainer.grad_sync.mode",  # compressed modes are refused with parallel=admm/minibatch/tensor3d
    "model.layer_order",  # dropout_norm_act is refused with stale_rows=pre_dropout (pipeqs, sylvie by default)
    "parallel.stale_rows",
}  # > 0 is refused with parallel=minibatch
FREE_BOUNDED = sorted(k for k in BOUNDS if k not in CROSS)
FREE_ENUM = sorted(k for k in ALLOWED if k not in CROSS and not k.endswith(".name"))


def in_range(key: str) -> st.SearchStrategy:
    bounds = BOUNDS.get(key, Bounds())
    low, low_excl, high, high_excl = bounds.low, bounds.low_exclusive, bounds.high, bounds.high_exclusive
    if LEAVES[key] is int:
        return st.integers(
            min_value=low + low_excl if low is not None else -100,
            max_value=high if high is not None else (low or 0) + 500,
        )
    return st.floats(
        min_value=low, max_value=high if high is not None else 1e6, exclude_min=low_excl, exclude_max=high_excl
    )


CORE = ("model", "parallel", "quantizer")
ALLOWED_CORES = [
    core
    for core in itertools.product(*(OPTIONS[g] for g in CORE), (1, 2, 3))
    if not conflicts(dict(zip(CORE + ("cluster.nproc",), core)))
]


@st.composite
def allowed_choice(draw) -> dict:
    choice = {g: draw(st.sampled_from(OPTIONS[g])) for g in GROUPS}
    return single_host(choice | dict(zip(CORE + ("cluster.nproc",), draw(st.sampled_from(ALLOWED_CORES)))))


def test_the_allowed_combinations_cover_every_option():
    for i, group in enumerate(CORE):
        assert {core[i] for core in ALLOWED_CORES} == set(OPTIONS[group]), group


@pytest.mark.parametrize("index", range(len(ALLOWED_CORES)), ids=["-".join(map(str, c)) for c in ALLOWED_CORES])
def test_every_allowed_combination_of_model_parallel_quantizer_composes(index):
    """Exhaustively; the other groups' options rotate through the cases."""
    choice = single_host(
        {g: OPTIONS[g][index % len(OPTIONS[g])] for g in GROUPS}
        | dict(zip(CORE + ("cluster.nproc",), ALLOWED_CORES[index]))
    )
    cfg, msg = _compose_checked(choice_overrides(choice))
    assert msg is None, f"{choice} is allowed but was rejected: {msg}"


@st.composite
def allowed_config(draw) -> tuple[list[str], dict]:
    choice = draw(allowed_choice())
    present = set().union(*(option_keys(g, choice[g]) for g in GROUPS)) | {
        k for k in LEAVES if k.startswith("trainer.")
    }
    bounded = draw(st.lists(st.sampled_from([k for k in FREE_BOUNDED if k in present]), unique=True, max_size=4))
    enums = draw(
        st.lists(
            st.sampled_from([k for k in FREE_ENUM if k in present] or ["trainer.optimizer"]), unique=True, max_size=3
        )
    )
    values = {k: draw(in_range(k)) for k in bounded} | {k: draw(st.sampled_from(ALLOWED[k])) for k in enums}
    return choice_overrides(choice) + [f"{k}={render(v)}" for k, v in values.items()], values


@pytest.mark.slow  # hypothesis: 50 compositions, about 30 s
@settings(max_examples=50, **SETTINGS)
@given(allowed_config())
def test_allowed_combinations_with_in_range_values_compose(drawn):
    overrides, values = drawn
    cfg, msg = _compose_checked(overrides)
    assert msg is None, f"{overrides} was rejected: {msg}"
    for key, value in values.items():
        assert OmegaConf.select(cfg, key) == value, key
