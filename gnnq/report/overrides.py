"""A run's config as the Hydra overrides that rebuild it: ``dataset=cora model=sage trainer.lr=0.005``.

For every config group the option (``conf/<group>/<option>.yaml`` on top of the schema) that
leaves the fewest differing keys is named, then each key that still differs is set. Where an
``experiment=`` preset rebuilds it in fewer overrides, the preset is named first
(``experiment=cora_gcn quantizer=uniform``). Keys that do not change what a run computes (where
data and runs live, logging) are left out.
"""

from __future__ import annotations

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
    out = {}
    for path in sorted((CONF_DIR / "experiment").glob("*.yaml")):
        data = yaml.safe_load(path.read_text()) or {}
        choices = {}
        for entry in data.pop("defaults", None) or []:
            if isinstance(entry, dict):
                ((key, option),) = entry.items()
                choices[key.removeprefix("override").strip().lstrip("/")] = option
        out[path.stem] = Preset(choices, {k: v for k, v in data.items() if isinstance(v, dict)})
    return out


def _group_overrides(group: str, values: dict, base: str, on_top: dict, exclude: frozenset[str]) -> list[str] | None:
    """Overrides that turn ``group``'s ``base`` option (with ``on_top`` set over it) into ``values``;
    None where a preset's values (``on_top``) would land on another option that lacks them."""
    # only options of the record's choice: their keys are the record's (an older record's others are ignored)
    candidates = [o for o in _options(group) if option_values(group, o).get("name") == values.get("name")] or [base]
    best = base if base in candidates else candidates[0]
    reference = {**option_values(group, best), **on_top}
    best_diff = _differences(values, reference)
    for option in candidates:
        diff = _differences(values, {**option_values(group, option), **on_top})
        if len(diff) < len(best_diff):
            best, best_diff = option, diff
    if best != base and not set(on_top) <= set(option_values(group, best)):
        return None
    out = [] if best == base else [f"{group}={best}"]
    for k, v in best_diff:
        if f"{group}.{k}" in IGNORED_KEYS | exclude:
            continue
        if isinstance(v, dict):  # a free-form dict (cluster.sbatch_extra): Hydra adds its keys with +
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
        mine = _group_overrides(
            group, values, preset.choices.get(group, defaults[group]), preset.values.get(group, {}), exclude
        )
        if mine is None:
            return None
        out += mine
    return out


def config_overrides(config: dict, exclude: frozenset[str] = frozenset()) -> list[str]:
    """Overrides that rebuild ``config`` from gnnq's defaults (keys in ``exclude`` left out), through the
    ``experiment=`` preset that needs the fewest of them when one needs fewer than none."""
    best = _overrides_from(config, Preset({}, {}), exclude)
    for name, preset in presets().items():
        mine = _overrides_from(config, preset, exclude)
        if mine is not None and len(mine) + 1 < len(best):
            best = [f"experiment={name}", *mine]
    return best
