"""A multirun job's directory name: its number and the overrides that tell it from the sweep's other points.

``hydra.sweep.subdir`` in conf/config.yaml is ``${gnnq_job_dir:${hydra.job.num},${hydra.job.override_dirname}}``;
gnnq's command line leaves the overrides every point shares out of ``override_dirname`` (exclude_keys), so
``3_cluster.nproc=4,model=sage`` (Hydra sorts them). Names are filesystem-safe (one path component, no spaces or
slashes),
at most ``MAX_NAME`` characters (a longer one is cut and ends in a hash of the whole), and unique (the number).
A single run's directory is ``<time>_<graph>_<method>`` (``run_name``: the graph as gnnq.config.dataset_name
names it, the ``experiment=`` preset, else the model and any parallel and quantizer choice besides sync and fp32).
The resolvers are registered on import; gnnq.launch.run_dir imports this module because its Hydra callback
travels with every job, also to a Slurm node.
"""

from __future__ import annotations

import hashlib
import re

from omegaconf import OmegaConf

from gnnq.config.dataset_name import safe_graph_name

RESOLVER = "gnnq_job_dir"
RUN_RESOLVER = "gnnq_run_name"
PLAIN = {"parallel": "sync", "quantizer": "fp32"}  # choices a run's name leaves out (conf/config.yaml's defaults)
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


def method_name(choices, config) -> str:
    """The ``experiment=`` preset; else (or where the command line overrode the parallel or quantizer choice the
    preset makes: ``experiment=adaqp_vanilla parallel=stale`` runs PipeGCN) ``gcn``, ``gcn-stale``,
    ``sage-sync-uniform`` from the choices, as the W&B run's name and gnnq-report name it."""
    experiment = choices.get("experiment") if choices is not None else None
    if experiment and not overridden_method_choices(str(experiment), choices):
        return str(experiment)
    picked = [str(config.get(group, {}).get("name", "")) for group in ("model", "parallel", "quantizer")]
    if picked[1:] == [PLAIN["parallel"], PLAIN["quantizer"]]:
        return picked[0]
    return "-".join(p for p in picked if p)


def overridden_method_choices(experiment: str, choices) -> list[str]:
    """The parallel and quantizer choices preset ``experiment`` makes that ``choices`` (what ran) replaced."""
    import yaml

    from gnnq.config.compose import CONF_DIR

    try:
        data = yaml.safe_load((CONF_DIR / "experiment" / f"{experiment}.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        return []
    made = {}
    for entry in data.get("defaults") or []:
        if isinstance(entry, dict) and len(entry) == 1:
            ((key, option),) = entry.items()
            made[key.removeprefix("override").strip().lstrip("/")] = str(option)
    return [f"{g}={choices.get(g)}" for g in ("parallel", "quantizer") if g in made and str(choices.get(g)) != made[g]]


def run_name(*, _root_) -> str:
    """``<graph>_<method>`` of the composed config (``hydra.run.dir``'s tail after the time)."""
    choices = OmegaConf.select(_root_, "hydra.runtime.choices", default=None)
    method = _UNSAFE.sub("_", method_name(choices, _root_)).strip("_")
    return f"{safe_graph_name(_root_.dataset)}_{method}"


def register() -> None:
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, job_dir_name)
    if not OmegaConf.has_resolver(RUN_RESOLVER):
        OmegaConf.register_new_resolver(RUN_RESOLVER, run_name)


register()
