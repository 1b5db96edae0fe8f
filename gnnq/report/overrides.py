"""A run's config as the Hydra overrides that rebuild it: ``dataset=cora model=sage trainer.lr=0.005``.

For every config group the option (``conf/<group>/<option>.yaml`` on top of the schema) that
leaves the fewest differing keys is named, then each key that still differs is set. Keys that
do not change what a run computes (where data and runs live, logging) are left out.
"""

from __future__ import annotations

from functools import lru_cache

import yaml
from omegaconf import OmegaConf

from gnnq.config.compose import CONF_DIR

IGNORED_KEYS = {"runs_root", "overwrite", "dataset.root", "dataset.download", "cluster.timeout_s", "trainer.checkpoint_every"}
IGNORED_GROUPS = {"logger"}


@lru_cache(maxsize=None)
def _defaults() -> dict[str, str]:
    """Default option per group, from conf/config.yaml's defaults list."""
    out = {}
    for entry in OmegaConf.to_container(OmegaConf.load(CONF_DIR / "config.yaml"))["defaults"]:
        if isinstance(entry, dict):
            (group, option), = entry.items()
            out[group] = option
    return out


@lru_cache(maxsize=None)
def option_values(group: str, option: str) -> dict:
    """The group's values with ``option`` chosen (schema defaults, then the option's file)."""
    from gnnq.config.typed import option_config

    return OmegaConf.to_container(option_config(group, option))


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def _differences(values: dict, reference: dict) -> list[tuple[str, object]]:
    return [(k, v) for k, v in values.items() if k in reference and reference[k] != v]  # other keys: another option's (old records)


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


def config_overrides(config: dict, exclude: frozenset[str] = frozenset()) -> list[str]:
    """Overrides that rebuild ``config`` from gnnq's defaults (keys in ``exclude`` left out)."""
    defaults = _defaults()
    out = []
    for group, values in config.items():
        if not isinstance(values, dict):  # top-level scalars (runs_root, overwrite) change nothing computed
            continue
        if group in IGNORED_GROUPS or group not in defaults or not (CONF_DIR / group).is_dir():
            continue
        default = defaults[group]
        # only options of the record's choice: their keys are the record's (an older record's others are ignored)
        candidates = [o for o in _options(group) if option_values(group, o).get("name") == values.get("name")] or [default]
        best = default if default in candidates else candidates[0]
        best_diff = _differences(values, option_values(group, best))
        for option in candidates:
            diff = _differences(values, option_values(group, option))
            if len(diff) < len(best_diff):
                best, best_diff = option, diff
        if best != default:
            out.append(f"{group}={best}")
        for k, v in best_diff:
            if f"{group}.{k}" in IGNORED_KEYS | exclude:
                continue
            if isinstance(v, dict):  # a free-form dict (cluster.sbatch_extra): Hydra adds its keys with +
                out += [f"+{group}.{k}.{kk}={format_value(vv)}" for kk, vv in v.items()]
            else:
                out.append(f"{group}.{k}={format_value(v)}")
    return out
