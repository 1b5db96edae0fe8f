"""A multirun job's directory name: its number and the overrides that tell it from the sweep's other points.

``hydra.sweep.subdir`` in conf/config.yaml is ``${gnnq_job_dir:${hydra.job.num},${hydra.job.override_dirname}}``;
gnnq's command line leaves the overrides every point shares out of ``override_dirname`` (exclude_keys), so
``3_cluster.nproc=4,model=sage`` (Hydra sorts them). Names are filesystem-safe (one path component, no spaces or
slashes),
at most ``MAX_NAME`` characters (a longer one is cut and ends in a hash of the whole), and unique (the number).
The resolver is registered on import; gnnq.launch.run_dir imports this module because its Hydra callback
travels with every job, also to a Slurm node.
"""

from __future__ import annotations

import hashlib
import re

from omegaconf import OmegaConf

RESOLVER = "gnnq_job_dir"
MAX_NAME = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+@-]+")


def job_dir_name(num, overrides: str) -> str:
    """``<num>_<overrides>`` made safe and short; ``<num>`` alone when no override tells the point apart."""
    slug = _UNSAFE.sub("_", str(overrides or "")).strip("_")
    name = f"{num}_{slug}" if slug else str(num)
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}~{digest}"
    return name


def override_key(override: str) -> str:
    """The key of an override as Hydra's ``override_dirname`` excludes it: ``+cluster.x@pkg=1`` -> ``cluster.x``."""
    return override.split("=", 1)[0].lstrip("+~").split("@", 1)[0]


def shared_keys(points: list[list[str]]) -> list[str]:
    """The keys of the overrides that are the same in every point (they do not tell points apart; all of a single
    point's)."""
    if not points:
        return []
    return [override_key(o) for o in points[0] if all(o in p for p in points[1:])]


def register() -> None:
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, job_dir_name)


register()
