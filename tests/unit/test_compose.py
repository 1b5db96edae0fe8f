"""Config composition through gnnq.config.compose: every preset and group option, defaults, sweeps, bad input."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gnnq.config.compose import CONF_DIR, SWEEPS_DIR, compose_config, expand_sweep
from gnnq.data.registry import dataset_names, expected_num_nodes
from gnnq.errors import ConfigError
from gnnq.launch.preflight import check_point, preflight

REPO = Path(__file__).resolve().parents[2]
CONF = CONF_DIR
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir())
EXPERIMENTS = sorted(p.stem for p in (CONF / "experiment").glob("*.yaml"))
GROUP_OPTIONS = [(g, p.stem) for g in GROUPS if g != "experiment" for p in sorted((CONF / g).glob("*.yaml"))]


def extra_for(group: str, option: str) -> list[str]:
    extra = {
        ("dataset", "files"): ["dataset.path=/tmp/x"],
        ("parallel", "minibatch"): ["cluster.nproc=1"],
        ("parallel", "admm"): ["model=gamlp"],
        ("parallel", "tensor3d"): ["model.norm=none"],
        ("parallel", "pipeqs"): ["quantizer=uniform"],
        ("parallel", "sylvie"): ["quantizer=uniform"],
        ("quantizer", "grid"): ["parallel=admm", "model=gamlp"],
        ("cluster", "multinode"): ["cluster.rendezvous=node1:29400"],
    }
    return extra.get((group, option), [])


def error_line(overrides: list[str]) -> str:
    with pytest.raises(ConfigError) as excinfo:
        check_point(compose_config(overrides))  # the config's values, then what needs the data (the node count)
    msg = str(excinfo.value)
    assert msg and "\n" not in msg, f"the message must be one line: {msg!r}"
    assert "Traceback" not in msg
    return msg


def test_conf_tree_has_the_expected_groups():
    expected = {
        "dataset",
        "partitioner",
        "model",
        "quantizer",
        "parallel",
        "cluster",
        "logger",
        "trainer",
        "experiment",
    }
    assert set(GROUPS) >= expected
    assert EXPERIMENTS, "no presets in conf/experiment"


# --- everything that ships composes ------------------------------------------------------


def test_defaults():
    cfg = compose_config([])
    assert cfg.dataset.name == "synthetic"
    assert cfg.cluster.nproc == 2 and cfg.cluster.hosts == 1 and cfg.cluster.name == "local"
    assert cfg.model.name == "gcn"
    assert cfg.parallel.name == "sync"
    assert cfg.quantizer.name == "fp32"
    assert cfg.partitioner.name == "metis"
    # AdaQP defaults: 3 layers, hidden 256, dropout 0.5, LayerNorm, Adam lr 0.01
    assert (cfg.model.layers, cfg.model.hidden, cfg.model.dropout, cfg.model.norm) == (3, 256, 0.5, "layer")
    assert (cfg.trainer.optimizer, cfg.trainer.lr) == ("adam", 0.01)
    assert "hydra" not in cfg
    # resolvable to plain containers (what W&B and config.yaml get)
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert plain["dataset"]["name"] == "synthetic" and isinstance(plain["runs_root"], str)


def test_runs_root_follows_env(monkeypatch, tmp_path):
    monkeypatch.setenv("GNNQ_RUNS", str(tmp_path / "elsewhere"))
    assert compose_config([]).runs_root == str(tmp_path / "elsewhere")


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_composes(name):
    text = (CONF / "experiment" / f"{name}.yaml").read_text()
    assert "# @package _global_" in text
    cfg = compose_config([f"experiment={name}"])
    preset = OmegaConf.load(CONF / "experiment" / f"{name}.yaml")
    # the preset's group choices took effect ...
    for entry in preset.get("defaults", []):
        if isinstance(entry, str):  # another preset it builds on (composed above)
            continue
        for key, option in entry.items():
            group = key.split()[-1].lstrip("/")
            chosen = OmegaConf.load(CONF / group / f"{option}.yaml")
            if "name" in chosen:
                assert cfg[group].name == chosen.name, (group, option)
    # ... and so did every value it sets
    body = OmegaConf.masked_copy(preset, [k for k in preset if k != "defaults"])

    def check(values, composed, where):
        for key in values:
            if OmegaConf.is_interpolation(values, key):  # e.g. ${published:...}: resolved in the composed config
                assert composed[key] is not None, f"{where}.{key}"
            elif OmegaConf.is_dict(values[key]):  # a nested node (trainer.grad_sync): the keys it sets
                check(values[key], composed[key], f"{where}.{key}")
            else:
                assert composed[key] == values[key], f"{where}.{key}"

    for group in body:
        check(body[group], cfg[group], group)


def test_experiment_values_win_over_defaults_and_lose_to_the_command_line():
    cfg = compose_config(["experiment=cora_gcn"])
    assert (cfg.dataset.name, cfg.model.layers, cfg.model.hidden, cfg.model.norm) == ("cora", 2, 64, "none")
    cfg = compose_config(["experiment=cora_gcn", "model.hidden=16", "cluster.nproc=3"])
    assert cfg.model.hidden == 16 and cfg.cluster.nproc == 3 and cfg.dataset.name == "cora"
    cfg = compose_config(["experiment=adaqp_reddit_sage"])
    assert (cfg.dataset.name, cfg.model.name, cfg.partitioner.name, cfg.cluster.nproc) == ("reddit", "sage", "metis", 4)


@pytest.mark.parametrize("group,option", GROUP_OPTIONS, ids=[f"{g}={o}" for g, o in GROUP_OPTIONS])
def test_every_group_option_composes(group, option):
    extra = extra_for(group, option)
    cfg = compose_config([f"{group}={option}", *extra])
    data = OmegaConf.load(CONF / group / f"{option}.yaml")
    overridden = {o.split("=")[0] for o in extra}
    for key, value in data.items():
        if key != "defaults" and f"{group}.{key}" not in overridden:  # defaults: what the option selects besides
            assert cfg[group][key] == value, f"{group}.{key}"


def test_every_registered_dataset_has_a_config_file():
    files = {OmegaConf.load(p).name for p in (CONF / "dataset").glob("*.yaml")}
    assert set(dataset_names()) <= files


@pytest.mark.parametrize("option", sorted(p.stem for p in (CONF / "dataset").glob("*.yaml")))
def test_dataset_node_counts_in_comments_match_the_registry(option):
    """The node count a dataset file states in its comment is the one partition checks use."""
    text = (CONF / "dataset" / f"{option}.yaml").read_text()
    cfg = compose_config([f"dataset={option}", *extra_for("dataset", option)])
    m = re.search(r"(\d+) nodes", text)
    if cfg.dataset.name == "synthetic":
        assert expected_num_nodes(cfg.dataset) == cfg.dataset.num_nodes
    elif cfg.dataset.name == "files":
        assert expected_num_nodes(cfg.dataset) is None  # known only after loading
    else:
        assert m is not None, "a named dataset's file states its node count"
        assert expected_num_nodes(cfg.dataset) == int(m.group(1))


# --- sweeps -------------------------------------------------------------------------------


def test_expand_sweep_is_the_cartesian_product():
    points = expand_sweep(["a=1,2", "b=x,y"])
    assert points == [["a=1", "b=x"], ["a=1", "b=y"], ["a=2", "b=x"], ["a=2", "b=y"]]
    assert expand_sweep(["a=1,2", "c=z"]) == [["a=1", "c=z"], ["a=2", "c=z"]]
    assert expand_sweep(["c=z"]) == [["c=z"]]
    assert len(expand_sweep(["a=range(0,3)", "b=x,y", "d=p,q"])) == 12


def test_preflight_composes_every_sweep_point():
    assert preflight(["model=gcn,sage", "cluster.nproc=1,2", "partitioner=metis,random"], multirun=True) == 8
    assert preflight(["model=gcn"], multirun=False) == 1
    with pytest.raises(ConfigError) as excinfo:
        preflight(["model=gcn,sage", "cluster.nproc=1,0"], multirun=True)
    assert "cluster.nproc" in str(excinfo.value)


def test_bad_sweep_syntax_is_a_config_error():
    with pytest.raises(ConfigError) as excinfo:
        expand_sweep(["a=1,2,"])
    assert "\n" not in str(excinfo.value)


# --- bad input is one line naming the key ---------------------------------------------------

BAD = {
    # unknown group option: names the group and lists the choices
    "unknown dataset": (["dataset=nope"], ["dataset=nope", "cora", "synthetic"]),
    "unknown model": (["model=gat"], ["model=gat", "gcn", "sage"]),
    "unknown experiment": (["experiment=nope"], ["experiment=nope", "cora_gcn"]),
    "unknown trainer": (["trainer=fast"], ["trainer=fast", "default"]),
    # wrong types
    "str for int": (["trainer.epochs=abc"], ["trainer.epochs", "abc"]),
    "float for int": (["model.layers=1.5"], ["model.layers"]),
    "bool for int": (["cluster.nproc=true"], ["cluster.nproc"]),
    "str for float": (["trainer.lr=fast"], ["trainer.lr"]),
    "str for list": (["logger.tags=abc"], ["logger.tags"]),
    "null for required": (["dataset.name=null"], ["dataset.name"]),
    # values out of range
    "negative epochs": (["trainer.epochs=-1"], ["trainer.epochs", ">= 1"]),
    "zero ranks": (["cluster.nproc=0"], ["cluster.nproc", ">= 1"]),
    "negative hidden": (["model.hidden=-5"], ["model.hidden"]),
    "negative lr": (["trainer.lr=-0.1"], ["trainer.lr"]),
    "zero lr": (["trainer.lr=0"], ["trainer.lr"]),
    "dropout 1": (["model.dropout=1.0"], ["model.dropout", "< 1"]),
    "negative weight decay": (["trainer.weight_decay=-1e-4"], ["trainer.weight_decay"]),
    "negative eval interval": (["trainer.eval_every=0"], ["trainer.eval_every"]),
    "homophily above 1": (["dataset.homophily=1.5"], ["dataset.homophily"]),
    "two local hosts": (["cluster.hosts=2"], ["cluster.hosts"]),
    # values outside an enumeration
    "bad partitioner name": (["partitioner.name=spectral"], ["partitioner.name", "metis", "random"]),
    "bad backend": (["cluster.backend=mpi"], ["cluster.backend", "gloo", "nccl"]),
    "bad device": (["cluster.device=tpu"], ["cluster.device", "cpu", "cuda"]),
    "nccl on the CPU": (["cluster.backend=nccl", "cluster.device=cpu"], ["cluster.device=cpu", "nccl"]),
    "bad norm": (["model.norm=batch"], ["model.norm", "layer"]),
    "bad optimizer": (["trainer.optimizer=lbfgs"], ["trainer.optimizer", "adam"]),
    "bad dataset name": (["dataset.name=nope"], ["dataset.name", "cora"]),
    # unknown keys, with and without +
    "unknown key": (["trainer.epochz=3"], ["trainer.epochz", "epochs"]),
    "unknown appended key": (["+trainer.epochz=3"], ["trainer.epochz", "epochs"]),
    "unknown top-level key": (["foo=1"], ["foo", "trainer"]),
    "unknown appended top-level key": (["+foo=1"], ["foo", "trainer"]),
    # more partitions than nodes
    "cora 3000 ranks": (["dataset=cora", "cluster.nproc=3000"], ["cluster.nproc=3000", "2708"]),
    "synthetic 101 ranks of 100 nodes": (["dataset.num_nodes=100", "cluster.nproc=101"], ["cluster.nproc=101", "100"]),
    "preset then too many ranks": (["experiment=citeseer_gcn", "cluster.nproc=3328"], ["cluster.nproc", "3327"]),
    # files without a path
    "files without path": (["dataset=files"], ["dataset.path"]),
    "files with empty path": (["dataset=files", "dataset.path=''"], ["dataset.path"]),
    # no room for test nodes
    "train+val = 1": (["dataset.train_frac=0.7", "dataset.val_frac=0.3"], ["dataset.train_frac", "dataset.val_frac"]),
    "train+val > 1": (["dataset.train_frac=0.8", "dataset.val_frac=0.5"], ["dataset.train_frac", "dataset.val_frac"]),
    "train+val = 1 on files": (
        ["dataset=files", "dataset.path=/tmp/x", "dataset.train_frac=0.5", "dataset.val_frac=0.5"],
        ["dataset.train_frac"],
    ),
    "train frac 0": (["dataset.train_frac=0"], ["dataset.train_frac"]),
    # adaptive quantization and overlap
    "bad parallel": (["parallel.name=pipeline"], ["parallel.name", "overlap"]),
    "bad solver": (["quantizer=adaptive", "quantizer.solver=gurobi"], ["quantizer.solver", "greedy", "milp"]),
    "bad bit choice": (["quantizer=adaptive", "quantizer.bit_choices=[2,3]"], ["quantizer.bit_choices", "1, 2, 4, 8"]),
    "empty bit choices": (["quantizer=adaptive", "quantizer.bit_choices=[]"], ["quantizer.bit_choices"]),
    "repeated bit choice": (["quantizer=adaptive", "quantizer.bit_choices=[4,4]"], ["quantizer.bit_choices"]),
    "grad bits with adaptive": (["quantizer=adaptive", "quantizer.grad_bits=8"], ["quantizer.grad_bits", "null"]),
    "lambda above 1": (
        ["quantizer=adaptive", "quantizer.variance_weight=1.5"],
        ["quantizer.variance_weight", "[0, 1]"],
    ),
    "group size 0": (["quantizer=adaptive", "quantizer.group_size=0"], ["quantizer.group_size", ">= 1"]),
    "assign cycle 0": (["quantizer=adaptive", "quantizer.assign_cycle=0"], ["quantizer.assign_cycle", ">= 1"]),
    "milp limit 0": (["quantizer=adaptive", "quantizer.milp_time_limit_s=0"], ["quantizer.milp_time_limit_s", "> 0"]),
    "cycle not shorter than the run": (
        ["quantizer=adaptive", "quantizer.assign_cycle=50", "trainer.epochs=50"],
        ["quantizer.assign_cycle=50", "trainer.epochs=50", "leave it out", "++quantizer.assign_cycle"],
    ),
    "adaptive first-cycle bits": (["quantizer=adaptive", "quantizer.bits=3"], ["quantizer.bits=3", "1, 2, 4, 8"]),
    # peer strategies
    "momentum 1": (["parallel=stale", "parallel.momentum=1.0"], ["parallel.momentum", "< 1"]),
    "negative momentum": (["parallel=stale", "parallel.momentum=-0.1"], ["parallel.momentum", ">= 0"]),
    "sampling rate 0": (["parallel=sampling", "parallel.sampling_rate=0"], ["parallel.sampling_rate", "> 0"]),
    "sampling rate above 1": (["parallel=sampling", "parallel.sampling_rate=1.5"], ["parallel.sampling_rate", "<= 1"]),
    "sampling with adaptive": (
        ["parallel=sampling", "quantizer=adaptive", "trainer.epochs=60"],
        ["parallel=sampling", "quantizer=adaptive", "uniform"],
    ),
    "sancus with adaptive": (
        ["parallel=sancus", "quantizer=adaptive", "trainer.epochs=60"],
        ["parallel=sancus", "quantizer=adaptive", "uniform"],
    ),
    "stale warm-up": (["parallel=stale", "parallel.warmup=none"], ["parallel.warmup='none'", "sync, zeros"]),
    "stale smooth": (
        ["parallel=stale", "parallel.smooth=rows"],
        ["parallel.smooth='rows'", "both, features, gradients"],
    ),
    "sample size": (
        ["parallel=sampling", "parallel.sample_size=round"],
        ["parallel.sample_size='round'", "floor, at_least_one"],
    ),
    "negative sancus threshold": (["parallel=sancus", "parallel.threshold=-1"], ["parallel.threshold", ">= 0"]),
    "negative staleness bound": (["parallel=sancus", "parallel.max_staleness=-1"], ["parallel.max_staleness", ">= 0"]),
    "minibatch on 2 ranks": (["parallel=minibatch"], ["parallel=minibatch", "cluster.nproc=2", "cluster.nproc=1"]),
    "minibatch quantized": (
        ["parallel=minibatch", "cluster.nproc=1", "quantizer=uniform", "quantizer.bits=8"],
        ["quantizer=uniform", "fp32"],
    ),
    "minibatch fanouts length": (
        ["parallel=minibatch", "cluster.nproc=1", "parallel.fanouts=[5,5]"],
        ["parallel.fanouts=[5, 5]", "model.layers=3"],
    ),
    "minibatch fanout 0": (
        ["parallel=minibatch", "cluster.nproc=1", "parallel.fanouts=[0]"],
        ["parallel.fanouts", "-1"],
    ),
    "adaptive time model": (
        ["quantizer=adaptive", "quantizer.time_model=guess"],
        ["quantizer.time_model='guess'", "profile, fixed"],
    ),
    "link speed 0": (
        ["quantizer=adaptive", "quantizer.time_model=fixed", "quantizer.link_gbit_per_s=0"],
        ["quantizer.link_gbit_per_s", "> 0"],
    ),
    "admm with gcn": (["parallel=admm"], ["parallel=admm", "model=gcn", "gamlp"]),
    "admm uniform": (
        ["parallel=admm", "model=gamlp", "quantizer=uniform", "quantizer.bits=8"],
        ["quantizer=uniform", "fp32", "grid"],
    ),
    "admm dropout": (["parallel=admm", "model=gamlp", "model.dropout=0.5"], ["model.dropout=0.5", "model.dropout=0"]),
    "admm more ranks than layers": (
        ["parallel=admm", "model=gamlp", "model.layers=2", "cluster.nproc=3"],
        ["3 ranks", "model.layers=2"],
    ),
    "admm rho 0": (["parallel=admm", "model=gamlp", "parallel.rho=0"], ["parallel.rho", "> 0"]),
    "admm grow needs every loss": (
        ["parallel=admm", "model=gamlp", "parallel.rho_schedule=grow", "trainer.eval_every=5"],
        ["trainer.eval_every=5", "trainer.eval_every=1"],
    ),
    "admm schedule": (
        ["parallel=admm", "model=gamlp", "parallel.rho_schedule=fast"],
        ["parallel.rho_schedule='fast'", "none, grow, paper"],
    ),
    "admm paper schedule needs every loss": (
        ["experiment=pdadmm_g_paper", "trainer.eval_every=2"],
        ["trainer.eval_every=2", "paper"],
    ),
    "admm init": (["parallel=admm", "model=gamlp", "parallel.init=deep"], ["parallel.init='deep'", "warmup2, chain"]),
    "admm chain lengths": (
        ["experiment=pdadmm_g_paper", "parallel.chain_mu=[1]"],
        ["parallel.chain_mu", "[2, 2, 2, 1]", "one value per chain stage"],
    ),
    "admm chain depths": (
        ["experiment=pdadmm_g_paper", "parallel.chain_layers=[2,10]"],
        ["parallel.chain_layers=[2, 10]", "model.layers=10"],
    ),
    "admm chain rho": (["experiment=pdadmm_g_paper", "parallel.chain_rho=[0,1]"], ["parallel.chain_rho", "> 0"]),
    "grid quantizes nothing": (
        ["parallel=admm", "model=gamlp", "quantizer=grid", "quantizer.quantize_p=false", "quantizer.quantize_q=false"],
        ["quantizer.quantize_p=false", "quantizer=fp32"],
    ),
    "admm step start": (["parallel=admm", "model=gamlp", "parallel.step_start=0"], ["parallel.step_start", "> 0"]),
    "grid without admm": (["quantizer=grid"], ["quantizer=grid", "parallel=sync", "admm"]),
    "grid levels": (
        ["parallel=admm", "model=gamlp", "quantizer=grid", "quantizer.grid_levels=1"],
        ["quantizer.grid_levels=1", "2..65536"],
    ),
    "grid range": (
        ["parallel=admm", "model=gamlp", "quantizer=grid", "quantizer.grid_max=-2"],
        ["quantizer.grid_max=-2", "grid_min"],
    ),
    "gamlp stale": (["model=gamlp", "parallel=stale"], ["parallel=stale", "model=gamlp", "sync"]),
    "gamlp quantized": (
        ["model=gamlp", "quantizer=uniform", "quantizer.bits=8"],
        ["quantizer=uniform", "model=gamlp", "fp32"],
    ),
    "gamlp hops": (["model=gamlp", "model.hops=-1"], ["model.hops", ">= 0"]),
    "optimizer": (["trainer.optimizer=lbfgs"], ["trainer.optimizer='lbfgs'", "adadelta"]),
    "inputs choice": (["parallel.inputs=twice"], ["parallel.inputs='twice'", "once, every_epoch"]),
    "inputs every epoch with quantize_input": (
        ["quantizer=uniform", "quantizer.quantize_input=true", "parallel.inputs=every_epoch"],
        ["quantizer.quantize_input=true", "parallel.inputs=every_epoch"],
    ),
    "stale rows choice": (
        ["parallel=stale", "parallel.stale_rows=both"],
        ["parallel.stale_rows='both'", "pre_dropout"],
    ),
    "pre-dropout stale rows with AdaQP's order": (
        ["experiment=pipegcn", "model.layer_order=dropout_norm_act"],
        ["parallel.stale_rows=pre_dropout", "model.layer_order=dropout_norm_act"],
    ),
    "gamlp layer order": (["model=gamlp", "model.layer_order=relu_first"], ["model.layer_order='relu_first'"]),
    "minibatch batch 0": (
        ["parallel=minibatch", "cluster.nproc=1", "parallel.batch_size=0"],
        ["parallel.batch_size", ">= 1"],
    ),
}


@pytest.mark.parametrize("overrides,needles", BAD.values(), ids=BAD.keys())
def test_bad_overrides_are_one_line_naming_the_key(overrides, needles):
    msg = error_line(overrides)
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


def test_limits_are_inclusive_where_they_should_be():
    # exactly as many ranks as nodes is allowed; the edges of the ranges are allowed
    assert compose_config(["dataset.num_nodes=4", "dataset.num_classes=2", "cluster.nproc=4"]).cluster.nproc == 4
    assert compose_config(["model.dropout=0", "dataset.homophily=1.0", "dataset.val_frac=0"]).model.dropout == 0
    assert compose_config(["dataset=cora", "cluster.nproc=2708"]).cluster.nproc == 2708
    # with an unknown node count (bring your own files) the check waits for the data
    assert compose_config(["dataset=files", "dataset.path=/tmp/x", "cluster.nproc=5000"]).dataset.path == "/tmp/x"


def test_hydra_overrides_are_passed_over():
    cfg = compose_config(["hydra.run.dir=/tmp/somewhere", "model=sage"])
    assert cfg.model.name == "sage"


@pytest.mark.parametrize(
    "override",
    [
        "trainer.lr=nan",
        "trainer.lr=inf",
        "model.dropout=nan",
        "dataset.homophily=nan",
        "dataset.train_frac=nan",
        "trainer.weight_decay=nan",
    ],
)
def test_non_finite_floats_are_rejected(override):
    msg = error_line([override])
    assert override.split("=")[0] in msg


@pytest.mark.parametrize(
    "overrides,key",
    [
        (["~dataset"], "dataset.name"),  # deleting a required group leaves dataset.name missing
        (["model.layers=???"], "model.layers"),  # an explicitly missing value
        (["model.hidden=${nope}"], "model.hidden"),  # interpolation to a key that does not exist
        (["trainer.epochs=${trainer.lr}"], "trainer.epochs"),  # interpolation of the wrong type
        (["runs_root=${oc.env:GNNQ_TEST_UNSET_VARIABLE}"], "runs_root"),  # unset environment variable
    ],
)
def test_unresolvable_values_are_config_errors(overrides, key):
    assert key in error_line(overrides)


@pytest.mark.slow  # every point of every sweep file: about 40 s
def test_every_sweep_file_composes_at_every_point(monkeypatch, tmp_path):
    monkeypatch.setenv("GNNQ_FILES_PATH", str(tmp_path))  # wide_graphs.yaml reads its own files (dataset.path=DIR)
    sweeps = sorted(p for p in (SWEEPS_DIR).glob("*.yaml") if not p.name.endswith(".table.yaml"))
    assert sweeps, "sweeps/ holds at least one sweep file"
    for path in sweeps:
        assert preflight([], True, path.stem, str(path.parent)) >= 1, path.name
    assert preflight([], True, "foundation_check", str(SWEEPS_DIR)) == 12


def test_published_presets_run_the_published_behaviours_and_gnnqs_keep_gnnqs():
    """Issue 28: AdaQP's layer-0 exchange every epoch (its AdaQP and its Vanilla), PipeGCN's pre-dropout stale rows."""
    vanilla = compose_config(["experiment=adaqp_vanilla_published"])
    assert (vanilla.parallel.name, vanilla.quantizer.name, vanilla.parallel.inputs, vanilla.model.layer_order) == (
        "sync",
        "fp32",
        "every_epoch",
        "dropout_norm_act",
    )
    assert compose_config(["experiment=adaqp_published"]).parallel.inputs == "every_epoch"
    assert compose_config(["experiment=adaqp_vanilla"]).parallel.inputs == "once"
    assert compose_config(["experiment=adaqp"]).parallel.inputs == "once"
    for name in ("pipegcn", "pipegcn_smoothed"):
        assert compose_config([f"experiment={name}"]).parallel.stale_rows == "pre_dropout"
    assert compose_config(["experiment=pipegcn_gnnq"]).parallel.stale_rows == "post_dropout"
