"""Bad input, second round (issue 31 items 5-9) and AdaQP at any length (issue 32 item 1), in process: each
case's one line, and the rules that replace what Hydra or the filesystem did silently. The same cases through the
real command line are in the reliability catalogue (tests/reliability/cases/)."""

from __future__ import annotations

import datetime
import errno

import pytest
import torch
from omegaconf import OmegaConf

from gnnq.config.compose import compose_config, expand_sweep, sweep_points
from gnnq.config.schema import MAX_TIMEOUT_S
from gnnq.errors import ConfigError
from gnnq.launch.preflight import plan
from gnnq.launch.run_dir import PlaceError, check_writable, claim_run_dir
from tests.reliability.cases.config import BAD_SWEEP_YAML

# --- item 5: tracebacks where one line belongs ---------------------------------------------------------------


@pytest.mark.parametrize("axis", ["trainer.seed=", "trainer.seed=range(0,0)"])
def test_an_empty_sweep_axis_is_one_line_naming_it(axis):
    with pytest.raises(ConfigError, match=rf"{axis.replace('(', r'[(]').replace(')', r'[)]')}: this sweep axis has"):
        expand_sweep(["model.hidden=16", axis])
    assert expand_sweep(["trainer.seed=''"]) == [["trainer.seed=''"]]  # an empty string said so is a value


def test_a_sweep_file_that_is_not_yaml_names_the_file_and_line(tmp_path):
    (tmp_path / "bad.yaml").write_text(BAD_SWEEP_YAML)
    with pytest.raises(ConfigError, match=r"bad\.yaml, line 8, column 6: not valid YAML \(.*\); fix the file"):
        sweep_points([], "bad", str(tmp_path))


def test_the_collective_timeout_is_checked_against_its_range():
    with pytest.raises(ConfigError, match=r"cluster\.timeout_s=100000000000000 .*\(allowed: 1\.\.2592000\)"):
        compose_config(["cluster.timeout_s=100000000000000"])
    assert compose_config([f"cluster.timeout_s={MAX_TIMEOUT_S}"]).cluster.timeout_s == MAX_TIMEOUT_S
    datetime.timedelta(seconds=MAX_TIMEOUT_S)  # what rank 0 builds from it: no OverflowError at the limit


# --- item 6: a group chosen twice ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, line",
    [
        (["dataset=cora", "dataset=citeseer"], "dataset is chosen twice: dataset=cora and dataset=citeseer"),
        (["experiment=adaqp", "experiment=cora_gcn"], "experiment is chosen twice: experiment=adaqp and"),
        (["+experiment=adaqp", "experiment=cora_gcn"], "experiment is chosen twice"),
    ],
)
def test_a_group_chosen_twice_is_refused_naming_both(overrides, line):
    with pytest.raises(ConfigError, match=line):
        compose_config(overrides)


def test_one_choice_and_its_keys_or_a_sweep_over_choices_are_not_twice():
    assert compose_config(["dataset=cora", "dataset.root=/tmp/x"]).dataset.name == "cora"
    assert compose_config(["dataset=cora", "dataset=cora"]).dataset.name == "cora"  # the same choice: no doubt
    assert [p for p, _ in plan(["dataset=cora,citeseer", "logger=none"], multirun=True)] == [
        ["dataset=cora", "logger=none"],
        ["dataset=citeseer", "logger=none"],
    ]


# --- item 8: paths ---------------------------------------------------------------------------------------------


def test_a_path_hydra_cannot_parse_gets_a_quoting_hint_that_works(tmp_path):
    path = str(tmp_path / "gräph données")
    with pytest.raises(ConfigError) as err:
        compose_config(["dataset=files", f"dataset.path={path}"])
    message = str(err.value)
    assert "LexerNoViableAltException" in message and "GNNQ_FILES_PATH" in message
    quoted = message.split('e.g. "', 1)[1].split('"', 1)[0]  # the override the line suggests
    assert compose_config(["dataset=files", quoted]).dataset.path == path


def test_gnnq_files_path_gives_the_directory_without_quoting(monkeypatch, tmp_path):
    monkeypatch.setenv("GNNQ_FILES_PATH", str(tmp_path / "gräph, (v2)"))
    assert compose_config(["dataset=files"]).dataset.path == str(tmp_path / "gräph, (v2)")
    assert compose_config(["dataset=files", "dataset.path=/elsewhere"]).dataset.path == "/elsewhere"


def test_a_tilde_in_gnnq_runs_is_the_home_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GNNQ_RUNS", "~/runs")
    assert compose_config([]).runs_root == str(tmp_path / "runs")


def test_a_name_longer_than_the_filesystem_takes_is_named_and_nothing_is_made(tmp_path):
    target = tmp_path / "runs" / ("x" * 300)
    with pytest.raises(PlaceError, match=r"hydra\.run\.dir: .* \(File name too long \(ENAMETOOLONG\): a name of 300"):
        claim_run_dir(target)
    with pytest.raises(PlaceError, match=r"ENAMETOOLONG"):
        check_writable(tmp_path / "a" / ("y" * 300) / "b", "runs_root")
    assert list(tmp_path.iterdir()) == []


# --- item 7: the memory guard counts the model -----------------------------------------------------------------


def _cfg(*overrides: str):
    return compose_config(["logger=none", *overrides])


@pytest.mark.parametrize(
    "overrides",
    [
        ["model.hidden=64"],
        ["model=sage", "model.hidden=32", "trainer.optimizer=adagrad"],
        ["model.hidden=16", "trainer.optimizer=sgd"],
        ["model.hidden=16", "trainer.optimizer=adadelta"],
        ["model.hidden=16", "model.norm=none", "model.layers=2"],
        ["model=gamlp", "model.hidden=16"],
    ],
)
def test_the_model_estimate_is_what_a_real_optimizer_step_holds(overrides):
    """4 B x P x (2 + s) equals the bytes of the weights, their gradients and torch's optimizer state after a
    step of the model the ranks build."""
    from gnnq.config.registry import MODELS
    from gnnq.launch.resources import model_state_bytes, resource_plan
    from gnnq.train.optim import make_optimizer

    cfg = _cfg(*overrides)
    model = MODELS.target(cfg.model.name).from_config(cfg.model, 20, 5)
    opt = make_optimizer(cfg, model.parameters())
    for p in model.parameters():
        p.grad = torch.ones_like(p)
    opt.step()
    held = sum(p.numel() + p.grad.numel() for p in model.parameters())
    held += sum(t.numel() for s in opt.state.values() for t in s.values() if torch.is_tensor(t) and t.dim() > 0)
    assert model_state_bytes(resource_plan(cfg), 20, 5) == 4 * held


def test_a_model_far_above_the_limit_is_refused_where_activations_alone_fit():
    from dataclasses import replace

    from gnnq.launch.resources import model_shape, rank_memory_mib, refuse_ranks_that_do_not_fit, resource_plan

    plan = resource_plan(
        _cfg("model.hidden=8000", "dataset.num_nodes=200", "cluster.nproc=1", "cluster.memory_limit_gib=1")
    )
    shape = model_shape(plan, 64, 8)
    assert shape.model_bytes / 2**30 > 0.9  # 64.6M parameters x 4 B x (weights, gradients, Adam's 2 moments)
    without_model = rank_memory_mib(200, 0, 2000, replace(shape, model_bytes=0.0))
    refuse_ranks_that_do_not_fit(plan, [without_model])  # what the estimate said before: it fits
    with pytest.raises(ConfigError, match=r"not enough memory: the 1 rank\(s\).*4 B x P x \(2 \+ s\) for the model"):
        refuse_ranks_that_do_not_fit(plan, [rank_memory_mib(200, 0, 2000, shape)])


def test_only_hosts_that_start_torchrun_count_its_agent():
    from gnnq.launch.resources import AGENT_MIB, refuse_ranks_that_do_not_fit, resource_plan

    local = resource_plan(_cfg("cluster.nproc=1", "cluster.memory_limit_gib=1"))
    refuse_ranks_that_do_not_fit(local, [1000.0])  # 1000 MiB of ranks fit in 1 GiB: no torchrun agent locally
    multinode = resource_plan(
        _cfg("cluster=multinode", "cluster.rendezvous=h:1", "cluster.nproc=1", "cluster.memory_limit_gib=1")
    )
    with pytest.raises(ConfigError, match=rf"plus {AGENT_MIB:.0f} MiB per torchrun"):
        refuse_ranks_that_do_not_fit(multinode, [1000.0])


# --- item 9: a full disk while a dataset's cache is written ----------------------------------------------------


def test_a_write_that_found_no_room_is_found_inside_what_a_reader_raised(tmp_path):
    from gnnq.data.loaders import write_failure
    from gnnq.data.loaders.pyg import _write_failed_message

    try:
        try:
            with open("/dev/full", "wb") as f:  # the kernel's own ENOSPC
                f.write(b"x")
        except OSError as exc:
            raise RuntimeError("PyG: could not save") from exc
    except RuntimeError as wrapped:
        found = write_failure(wrapped)
    assert found is not None and found.errno == errno.ENOSPC
    line = _write_failed_message("cora", tmp_path / "Cora" / "processed", found, tmp_path / "Cora" / "raw")
    assert "processed (No space left on device (ENOSPC))" in line and "intact and kept" in line
    assert "delete" not in line and "corrupt" not in line
    assert write_failure(ValueError("not a write")) is None


# --- issue 32, item 1: AdaQP at any length; a method's key in a sweep that mixes methods -----------------------


@pytest.mark.parametrize("epochs, cycle", [(200, 50), (30, 7), (7, 1), (1, 1)])
def test_the_default_assign_cycle_follows_the_run_length(epochs, cycle):
    cfg = _cfg("experiment=adaqp", f"trainer.epochs={epochs}")
    assert OmegaConf.to_container(cfg, resolve=True)["quantizer"]["assign_cycle"] == cycle


def test_an_explicit_cycle_too_long_names_the_ways_out():
    with pytest.raises(ConfigError, match=r"leave it out .*here 7.*quantizer=uniform.*\+\+quantizer\.assign_cycle=N"):
        _cfg("experiment=adaqp", "trainer.epochs=30", "quantizer.assign_cycle=30")
    assert _cfg("experiment=adaqp", "trainer.epochs=30", "quantizer.assign_cycle=29").quantizer.assign_cycle == 29


def test_plus_plus_sets_a_key_only_where_the_chosen_option_has_it():
    assert "assign_cycle" not in _cfg("quantizer=fp32", "++quantizer.assign_cycle=10").quantizer
    assert _cfg("quantizer=adaptive", "++quantizer.assign_cycle=10").quantizer.assign_cycle == 10
    with pytest.raises(ConfigError, match="no such key"):  # a key no choice has is still a typo
        _cfg("quantizer=adaptive", "++quantizer.assign_cylce=10")


def test_a_sweep_that_mixes_methods_takes_the_key_with_plus_plus_and_names_it_otherwise():
    sweep = ["experiment=adaqp_vanilla,adaqp", "trainer.epochs=30", "logger=none"]
    with pytest.raises(
        ConfigError, match=r"fp32.*to set it only in the sweep's points .*: \+\+quantizer\.assign_cycle=10"
    ):
        plan([*sweep, "quantizer.assign_cycle=10"], multirun=True)
    points = plan([*sweep, "++quantizer.assign_cycle=10"], multirun=True)
    resolved = [OmegaConf.to_container(cfg, resolve=True)["quantizer"] for _, cfg in points]
    assert resolved == [{"name": "fp32"}, {**resolved[1], "name": "adaptive", "assign_cycle": 10}]


def test_the_sweep_plan_of_a_short_adaqp_point_composes_with_the_default_cycle():
    points = plan(["experiment=adaqp_vanilla,adaqp", "trainer.epochs=12", "logger=none"], multirun=True)
    assert OmegaConf.to_container(points[1][1], resolve=True)["quantizer"]["assign_cycle"] == 3
