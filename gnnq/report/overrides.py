"""A run's config as the Hydra overrides that rebuild it: ``dataset=cora model=sage trainer.lr=0.005``.

For every config group the option (``conf/<group>/<option>.yaml`` on top of the schema) that
leaves the fewest differing keys is named, then each key that still differs is set. Where an
``experiment=`` preset rebuilds it in fewer overrides, the preset is named first
(``experiment=cora_gcn quantizer=uniform``). Keys that do not change what a run computes (where
data and runs live, logging) are left out.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import NamedTuple

import yaml
from omegaconf import OmegaConf

from gnnq.config.compose import CONF_DIR
from gnnq.config.typed import option_config

IGNORED_KEYS = {
    "runs_root",
    "overwrite",
    "dataset.root",
    "dataset.download",
    "cluster.timeout_s",
    "trainer.checkpoint_every",
    "trainer.trace",
}
IGNORED_GROUPS = {"logger"}


@lru_cache(maxsize=None)
def _defaults() -> dict[str, str]:
    """Default option per group, from conf/config.yaml's defaults list."""
    out = {}
    for entry in OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml"))["defaults"]:
        if isinstance(entry, dict):
            ((group, option),) = entry.items()
            out[group] = option
    return out


@lru_cache(maxsize=None)
def option_values(group: str, option: str) -> dict:
    """The group's values with ``option`` chosen (schema defaults, then the option's file)."""
    return OmegaConf.to_container(option_config(group, option))


@lru_cache(maxsize=None)
def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def _differences(values: dict, reference: dict) -> list[tuple[str, object]]:
    return [
        (k, v) for k, v in values.items() if k in reference and reference[k] != v
    ]  # other keys: another option's (old records)


def format_value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, str) and (not value or any(c in value for c in " ,=[]{}()'\"$:") or _reads_as_other(value)):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return str(value)


def _reads_as_other(text: str) -> bool:
    """Whether Hydra would read this string as a number, boolean or null."""
    try:
        float(text)  # Hydra's grammar reads 1e-3, inf and nan as floats where YAML 1.1 does not
        return True
    except ValueError:
        pass
    try:
        return not isinstance(yaml.safe_load(text), str)
    except yaml.YAMLError:
        return True


class Preset(NamedTuple):
    """An ``experiment=`` preset: the option it picks per group and the values it sets on top (per group)."""

    choices: dict[str, str]
    values: dict[str, dict]


@lru_cache(maxsize=None)
def presets() -> dict[str, Preset]:
    """Every ``experiment=`` preset, with what it takes from the presets it builds on (``adaqp_published`` starts
    from ``adaqp``: its defaults list names it), as Hydra composes them: the base first, then the preset's own."""
    return {path.stem: _preset(path.stem, ()) for path in sorted((CONF_DIR / "experiment").glob("*.yaml"))}


def _preset(name: str, seen: tuple[str, ...]) -> Preset:
    data = yaml.safe_load((CONF_DIR / "experiment" / f"{name}.yaml").read_text()) or {}
    choices: dict[str, str] = {}
    values: dict[str, dict] = {}
    for entry in data.pop("defaults", None) or []:
        if isinstance(entry, dict):
            ((key, option),) = entry.items()
            choices[key.removeprefix("override").strip().lstrip("/")] = option
        elif isinstance(entry, str) and entry != "_self_" and entry not in seen:
            base = entry.removeprefix("/experiment/").lstrip("/")
            if (CONF_DIR / "experiment" / f"{base}.yaml").is_file():
                inner = _preset(base, (*seen, name))
                choices.update(inner.choices)
                _merge(values, inner.values)
    _merge(values, {group: own for group, own in data.items() if isinstance(own, dict)})
    return Preset(choices, values)


def _merge(values: dict[str, dict], more: dict[str, dict]) -> None:
    for group, own in more.items():
        values[group] = {**values.get(group, {}), **own}


def _over(base: dict, top: dict) -> dict:
    """``top`` set over ``base``, nested nodes merged key by key (a preset setting trainer.grad_sync.mode keeps the
    node's other keys), as Hydra merges them."""
    out = dict(base)
    for k, v in top.items():
        out[k] = _over(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _group_overrides(group: str, values: dict, base: str, on_top: dict, exclude: frozenset[str]) -> list[str] | None:
    """Overrides that turn ``group``'s ``base`` option (with ``on_top`` set over it) into ``values``;
    None where a preset's values (``on_top``) would land on another option that lacks them."""
    # only options of the record's choice: their keys are the record's (an older record's others are ignored)
    candidates = [o for o in _options(group) if option_values(group, o).get("name") == values.get("name")] or [base]
    best = base if base in candidates else candidates[0]
    reference = _over(option_values(group, best), on_top)
    best_diff = _differences(values, reference)
    for option in candidates:
        diff = _differences(values, _over(option_values(group, option), on_top))
        if len(diff) < len(best_diff):
            best, best_diff = option, diff
    if best != base and not set(on_top) <= set(option_values(group, best)):
        return None
    out = [] if best == base else [f"{group}={best}"]
    reference = _over(option_values(group, best), on_top)
    for k, v in best_diff:
        if f"{group}.{k}" in IGNORED_KEYS | exclude:
            continue
        if isinstance(v, dict) and isinstance(reference.get(k), dict) and set(v) <= set(reference[k]):
            # a node of the schema (trainer.grad_sync): its keys exist, the ones that differ are set
            out += [f"{group}.{k}.{kk}={format_value(vv)}" for kk, vv in v.items() if reference[k].get(kk) != vv]
        elif isinstance(v, dict):  # a free-form dict (cluster.sbatch_extra): Hydra adds its keys with +
            out += [f"+{group}.{k}.{kk}={format_value(vv)}" for kk, vv in v.items()]
        else:
            out.append(f"{group}.{k}={format_value(v)}")
    return out


def _overrides_from(config: dict, preset: Preset, exclude: frozenset[str]) -> list[str] | None:
    defaults = _defaults()
    out = []
    for group, values in config.items():
        if not isinstance(values, dict):  # top-level scalars (runs_root, overwrite) change nothing computed
            continue
        if group in IGNORED_GROUPS or group not in defaults or not (CONF_DIR / group).is_dir():
            continue
        on_top = {k: resolved_value(v, config) for k, v in preset.values.get(group, {}).items()}
        mine = _group_overrides(group, values, preset.choices.get(group, defaults[group]), on_top, exclude)
        if mine is None:
            return None
        out += mine
    return out


def resolved_value(value, config: dict):
    """A preset's value as the run's config makes it (``${published:adaqp,${dataset.name},group_size,100}``: the
    number for the run's dataset); the text itself where it cannot be resolved."""
    if not (isinstance(value, str) and "${" in value):
        return value
    import gnnq.config.published  # noqa: F401 - registers the resolver the presets use

    try:
        return OmegaConf.to_container(OmegaConf.create({**config, "_value_": value}), resolve=True)["_value_"]
    except Exception:  # noqa: BLE001 - an interpolation this config cannot resolve: compared as written
        return value


def config_overrides(config: dict, exclude: frozenset[str] = frozenset(), preset: str | None = None) -> list[str]:
    """Overrides that rebuild ``config`` from gnnq's defaults (keys in ``exclude`` left out): through ``preset``
    (the ``experiment=`` preset the run was made with) where given and it fits, else through the preset that needs
    the fewest of them when one needs fewer than none."""
    key = (json.dumps(config, sort_keys=True, default=str), exclude, preset)
    return list(_cached_overrides(key))


@lru_cache(maxsize=4096)
def _cached_overrides(key: tuple) -> tuple[str, ...]:
    """``config_overrides`` once per distinct config (the runs of a sweep share a few; reports read thousands)."""
    text, exclude, preset = key
    config = json.loads(text)
    if preset is not None and preset in presets():
        mine = _overrides_from(config, presets()[preset], exclude)
        if mine is not None:
            return (f"experiment={preset}", *mine)
    best = _overrides_from(config, Preset({}, {}), exclude)
    for name, candidate in presets().items():
        mine = _overrides_from(config, candidate, exclude)
        if mine is not None and len(mine) + 1 < len(best):
            best = [f"experiment={name}", *mine]
    return tuple(best)


def composition_differences(overrides: list[str], config: dict, exclude: frozenset[str] = frozenset()) -> list[str]:
    """Where ``gnnq`` with ``overrides`` composes to another config than ``config`` (keys a rerun line leaves out,
    and ``exclude``, aside): ``["quantizer.name: adaptive, expected fp32"]``; [] when it rebuilds it exactly."""
    from gnnq.config.compose import compose_config
    from gnnq.errors import ConfigError

    try:
        composed = OmegaConf.to_container(compose_config(list(overrides)), resolve=True)
    except ConfigError as exc:  # a line gnnq refuses rebuilds nothing
        return [f"it does not compose: {exc}"]
    out = []
    for key, want in _flat(config).items():
        if key in exclude or key in IGNORED_KEYS or key.split(".", 1)[0] in IGNORED_GROUPS or "." not in key:
            continue
        got = _flat(composed).get(key, "<absent>")
        if got != want:
            out.append(f"{key}: {got!r}, expected {want!r}")
    return out


def _flat(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out
