"""What a run calls its graph and its method: run-dir names and the report's dataset key (gnnq.config.dataset_name,
gnnq.launch.job_names.run_name, gnnq.report.fields.dataset)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig

import gnnq.launch.job_names  # noqa: F401 - registers the run-dir resolvers
from gnnq.config.compose import CONF_DIR, register_configs
from gnnq.report.aggregate import group_runs, leaderboards
from gnnq.report.fields import dataset


def _run_dir(overrides: list[str]) -> str:
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=overrides, return_hydra_config=True)
            HydraConfig.instance().set_config(cfg)
            return Path(str(cfg.hydra.run.dir)).name.split("_", 1)[1]
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.parametrize(
    "overrides, name",
    [
        ([], "synthetic_gcn"),
        (["experiment=adaqp", "dataset=cora"], "cora_adaqp"),
        (["parallel=stale", "quantizer=uniform", "model=sage"], "synthetic_sage-stale-uniform"),
        (["dataset=files", "dataset.path=/data/my road/"], "my_road_gcn"),
        (["dataset=files", "dataset.path=/data/x", "dataset.graph_name=road", "experiment=bnsgcn"], "road_bnsgcn"),
    ],
)
def test_run_dir_names_say_the_graph_and_the_method(overrides, name):
    assert _run_dir(overrides) == name


def _record(path: str, fingerprint: str | None, seed: int, graph_name: str | None = None) -> tuple[Path, dict]:
    ds = {"name": "files", "path": path, "graph_name": graph_name}
    config = {"dataset": ds, "trainer": {"seed": seed}, "model": {"name": "gcn"}}
    rec = {"status": "ok", "config": config, "test": 0.5, "best_val": 0.5, "epoch_time_s": 0.1}
    if fingerprint:
        rec["dataset_fingerprint"] = fingerprint
    return Path(f"run{seed}"), rec


def test_files_graphs_are_keyed_by_name_and_content():
    same_name = [_record("/a/road", "11111111aaaa", 0), _record("/b/road", "22222222bbbb", 1)]
    assert [dataset(r) for _, r in same_name] == ["road@11111111", "road@22222222"]
    # the configurations differ only in path here, but even with one config the graphs would not be ranked together
    boards = leaderboards(group_runs(same_name))
    assert sorted(b.dataset for b in boards) == ["road@11111111", "road@22222222"]
    assert all(len(b.ranked) == 1 for b in boards)
    # one graph, two seeds: one configuration
    moved = [_record("/a/road", "11111111aaaa", 0, "road"), _record("/a/road", "11111111aaaa", 1, "road")]
    assert [len(g.runs) for g in group_runs(moved)] == [2]
    # records from before fingerprints: the path tells them apart
    old = [_record("/a/road", None, 0), _record("/b/road", None, 0)]
    assert len({dataset(r) for _, r in old}) == 2
    assert dataset({"config": {"dataset": {"name": "cora"}}}) == "cora"
