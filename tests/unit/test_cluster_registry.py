"""Every cluster choice is one registry line whose parts all resolve: its schema, its conf file, its class in
gnnq/launch/clusters/<name>.py (a Cluster that starts its ranks), and the check of its own values in
gnnq.config.clusters. A line that lacks a part fails here, naming the entry and the part; and nothing outside a
cluster's own files compares cluster names."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gnnq.config import schema as s
from gnnq.config.compose import CONF_DIR
from gnnq.config.registry import CLUSTERS, Choice, resolve
from gnnq.launch.clusters.base import Cluster
from tools.house_metrics import choice_names, name_comparisons

REPO = Path(__file__).resolve().parents[2]


def _resolved(ref):
    try:
        return resolve(ref)
    except (ImportError, AttributeError, ValueError):
        return None


def missing_parts(choice: Choice) -> list[str]:
    """The parts of the cluster entry ``choice`` that are absent or do not resolve (empty: complete)."""
    missing = []
    if not (dataclasses.is_dataclass(choice.schema) and issubclass(choice.schema, s.ClusterConfig)):
        missing.append("schema")
    conf = CONF_DIR / "cluster" / f"{choice.name}.yaml"
    if not conf.is_file() or OmegaConf.load(conf).get("name") != choice.name:
        missing.append("conf")
    if not choice.about:
        missing.append("about")
    target = _resolved(choice.target)
    if not (inspect.isclass(target) and issubclass(target, Cluster) and target.start is not Cluster.start):
        missing.append("class")  # a Cluster subclass that starts its ranks
    elif Path(inspect.getfile(target)).stem != choice.name:
        missing.append("class file")  # its own file, gnnq/launch/clusters/<name>.py
    check = _resolved(choice.check) if choice.check else None
    if not callable(check):
        missing.append("check")
    return missing


@pytest.mark.parametrize("choice", CLUSTERS.choices(), ids=[c.name for c in CLUSTERS.choices()])
def test_every_cluster_entry_resolves_every_part(choice):
    missing = missing_parts(choice)
    assert not missing, f"cluster={choice.name} lacks: {', '.join(missing)}"


def test_an_entry_lacking_a_part_is_caught_and_named():
    bare = Choice("local", s.ClusterConfig, "gnnq.launch.clusters.local:LocalCluster", "x")
    assert missing_parts(bare) == ["check"]
    unstarted = Choice("local", s.ClusterConfig, Cluster, "x", check="gnnq.config.clusters:check_local")
    assert missing_parts(unstarted) == ["class"]
    elsewhere = Choice(
        "nowhere", s.LoggerConfig, "gnnq.launch.clusters.local:LocalCluster", "", check="gnnq.config.clusters:check_x"
    )
    assert missing_parts(elsewhere) == ["schema", "conf", "about", "class file", "check"]


def test_no_cluster_name_is_compared_outside_the_registries():
    """Cluster names are compared nowhere in gnnq/ but in the registry and gnnq/launch/clusters/ (a planted one
    is found)."""
    clusters = choice_names(CONF_DIR, ("cluster",))
    found = [r for r in name_comparisons(REPO / "gnnq", clusters)]
    assert not found, found
    assert clusters == set(CLUSTERS.names())


def test_a_planted_cluster_comparison_is_found(tmp_path):
    (tmp_path / "x.py").write_text('def f(cfg):\n    return cfg.cluster.name == "emulated"\n')
    assert name_comparisons(tmp_path, {"emulated"}) == [((tmp_path / "x.py").as_posix(), 2, "emulated")]


@pytest.mark.parametrize("package", ["config", "launch", "train"])
def test_no_method_or_cluster_name_is_compared_in_config_launch_train(package):
    """config/, launch/ and train/ read a choice's facts from its registry line (value checks, trace flags, the
    assigner, the aggregation, checkpoint support), never compare its name; the registry and the methods' own
    checks (gnnq/config/method_checks.py) are the places that may."""
    found = name_comparisons(REPO / "gnnq" / package, choice_names(CONF_DIR))
    assert not found, found


def test_a_planted_method_constant_is_found(tmp_path):
    (tmp_path / "x.py").write_text('STALE = "stale"\n\n\ndef f(cfg):\n    return cfg.parallel.name == STALE\n')
    assert [r[2] for r in name_comparisons(tmp_path, {"stale"})] == ["stale"]
