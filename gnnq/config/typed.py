"""A plain config (a run's config.yaml, a dict) in the typed schema: each group its chosen option's dataclass."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gnnq.config.registry import choice_schema, group_registries
from gnnq.config.schema import Config


def typed_config(plain) -> DictConfig:
    """``plain`` merged onto the schema of the options it names; unknown keys and wrong types raise."""
    data = plain if isinstance(plain, DictConfig) else OmegaConf.create(plain)
    cfg = OmegaConf.structured(Config)
    for group in group_registries():
        node = data.get(group)
        name = node.get("name") if isinstance(node, DictConfig) else None
        cfg[group] = OmegaConf.structured(choice_schema(group, name))
    return OmegaConf.merge(cfg, OmegaConf.masked_copy(data, [f.name for f in fields(Config) if f.name in data]))


def load_run_config(path: Path) -> DictConfig:
    """The run's saved config, typed and read-only: the workers get it as the launcher validated it."""
    cfg = typed_config(OmegaConf.load(path))
    OmegaConf.set_readonly(cfg, True)
    return cfg


def option_config(group: str, option: str) -> DictConfig:
    """``conf/<group>/<option>.yaml`` on its choice's schema, as Hydra would compose the group (without Hydra)."""
    from gnnq.config.compose import CONF_DIR  # Hydra: not for the ranks, which load their saved config

    values = OmegaConf.load(CONF_DIR / group / f"{option}.yaml")
    values.pop(
        "defaults", None
    )  # the choice's schema (merged below) and what else it selects (cluster=slurm: Hydra's launcher)
    return OmegaConf.merge(OmegaConf.structured(choice_schema(group, values.get("name"))), values)
