"""Value bounds live on the schema fields (``bounded`` in gnnq.config.schema); validate reads them from there.

A bound removed from its field fails here (docs/config.md still states it), a bound validate does not enforce
fails here (each one is tried just outside its range), and a table of bounds regrown in gnnq/config fails here.
"""

from __future__ import annotations

import ast
import copy
import functools
import re
import typing

import pytest
from omegaconf import DictConfig, OmegaConf

from gnnq.config.compose import compose_config
from gnnq.config.reference import DOC
from gnnq.config.registry import group_registries
from gnnq.config.schema import Bounds, Config, bounded, bounds_of, schema_bounds
from gnnq.config.validate import all_bounds, validate
from gnnq.errors import ConfigError
from tests.conftest import REPO

BOUNDS = all_bounds()


def _classes_with_key(key: str) -> list[tuple[str, str, type]]:
    """(group, choice, schema class) of every choice whose schema has ``key`` (``trainer.*``: no choice)."""
    group, _, name = key.partition(".")
    registry = group_registries().get(group)
    if registry is None:
        return [(group, "", typing.get_type_hints(Config)[group])]
    return [(group, c.name, c.schema) for c in registry.choices() if name in c.schema.__dataclass_fields__]


def _documented_bounds() -> dict[tuple[str, str], str]:
    """(schema class name, key) -> the bounds part of docs/config.md's 'allowed' cell, for every row stating one."""
    out, cls = {}, None
    for line in DOC.read_text().splitlines():
        if m := re.match(r"^### (\w+) \(", line):
            cls = m.group(1)
        elif (m := re.match(r"^\| `([\w.]+)` \| [^|]+ \| [^|]+ \| ([^|]*(?:\\\|[^|]*)*)\|", line)) and cls:
            stated = [p for p in m.group(2).strip().split(", ") if re.match(r"^[<>]=? ", p)]
            if stated:
                out[(cls, m.group(1))] = ", ".join(stated)
        elif line.startswith("## "):
            cls = None if line != "## trainer" else "TrainerConfig"
    return out


def _as_text(bounds: Bounds | None) -> str:
    if bounds is None:
        return ""
    parts = [f"{'>' if bounds.low_exclusive else '>='} {bounds.low}"] if bounds.low is not None else []
    parts += [f"{'<' if bounds.high_exclusive else '<='} {bounds.high}"] if bounds.high is not None else []
    return ", ".join(parts)


def test_every_bound_the_reference_states_is_on_its_schema_field():
    documented = _documented_bounds()
    assert len(documented) >= 40, "docs/config.md should state the bounds of dozens of keys"
    classes = {c.schema.__name__: c.schema for r in group_registries().values() for c in r.choices()}
    classes["TrainerConfig"] = typing.get_type_hints(Config)["trainer"]
    for (cls_name, key), stated in documented.items():
        field_bounds = bounds_of(classes[cls_name], key.rsplit(".", 1)[1])
        assert _as_text(field_bounds) == stated, (
            f"{cls_name}.{key.rsplit('.', 1)[1]}: docs/config.md says {stated!r}, the schema field "
            f"{'has no bounded(...)' if field_bounds is None else 'says ' + repr(_as_text(field_bounds))}"
        )


def test_a_key_shared_by_choices_has_the_same_bounds_in_each():
    for key in BOUNDS:
        seen = {cls.__name__: schema_bounds(cls, f"{group}.").get(key) for group, _, cls in _classes_with_key(key)}
        assert len(set(seen.values())) == 1, f"{key}: different bounds per choice: {seen}"


def test_a_choice_that_only_changes_the_default_keeps_the_bounds():
    from gnnq.config.schema import EmulatedClusterConfig, GamlpModelConfig

    assert "dropout" in vars(GamlpModelConfig)["__annotations__"]  # it redeclares dropout, without bounded()
    assert bounds_of(GamlpModelConfig, "dropout") == Bounds(0.0, False, 1.0, True)
    assert bounds_of(EmulatedClusterConfig, "hosts") == Bounds(1, False, None, False)


def test_bounded_refuses_both_ends_of_one_side():
    with pytest.raises(ValueError, match="ge or gt"):
        bounded(1, ge=0, gt=0)


def _just_outside(bounds: Bounds):
    """A value one step below the lowest (or at an exclusive lowest), else one above the highest."""
    if bounds.low is not None:
        return bounds.low if bounds.low_exclusive else bounds.low - 1, ">" if bounds.low_exclusive else ">="
    return bounds.high if bounds.high_exclusive else bounds.high + 1, "<" if bounds.high_exclusive else "<="


@functools.cache
def _composed(overrides: tuple[str, ...]) -> DictConfig:
    """A config of these choices, composed as ``gnnq`` does (once per set of choices), not yet validated: validate
    checks bounds before what choices need of each other (parallel=minibatch: one rank)."""
    return compose_config(list(overrides), check=False)


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_validate_enforces_every_schema_bound_with_its_message(key):
    group, choice, cls = _classes_with_key(key)[0]
    overrides = [f"{group}={choice}"] if choice else []
    if choice:  # the choices it needs of other groups (parallel=admm for model=gamlp)
        overrides += [f"{n.group}={n.allowed[0]}" for n in group_registries()[group].choice(choice).needs]
    cfg = copy.deepcopy(_composed(tuple(overrides)))
    value, sign = _just_outside(BOUNDS[key])
    OmegaConf.update(cfg, key, value)
    with pytest.raises(ConfigError) as raised:
        validate(cfg)
    expected = f"{key}={value} is not allowed; it must be {sign} "
    assert str(raised.value).startswith(expected), str(raised.value)


def _path_keyed_numeric_dicts(source: str) -> list[str]:
    """Dict literals keyed by config paths ("group.key") whose values are numbers or (number, flag) pairs."""

    def numeric(node: ast.AST) -> bool:
        if isinstance(node, ast.Tuple) and len(node.elts) == 2:
            return isinstance(node.elts[1], ast.Constant) and isinstance(node.elts[1].value, bool)
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict) and node.keys:
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if keys and all(re.fullmatch(r"[a-z_]+(\.[a-z_]+)+", k) for k in keys) and any(map(numeric, node.values)):
                found.append(", ".join(keys[:3]))
    return found


def test_no_table_of_bounds_outside_the_schema_fields():
    assert _path_keyed_numeric_dicts('LOWER = {"model.layers": (1, False), "trainer.lr": (0.0, True)}')
    assert _path_keyed_numeric_dicts('UPPER = {"cluster.timeout_s": MAX, "model.dropout": 1.0}')
    assert not _path_keyed_numeric_dicts('ALLOWED = {"model.norm": ("layer", "none"), "x.bits": (1, 2, 4, 8)}')
    for path in sorted((REPO / "gnnq" / "config").glob("*.py")):
        found = _path_keyed_numeric_dicts(path.read_text())
        assert not found, f"{path.name} keys numbers by config path ({found}): put bounds on the schema fields"
        assert not re.search(r"^(LOWER|UPPER)_BOUNDS\b", path.read_text(), re.M), path.name
