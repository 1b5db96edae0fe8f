"""Config errors: every one stops before any rank starts with one line naming the key and what is allowed,
exit code 2 and no record (docs/runs.md "Config checks")."""

from __future__ import annotations

from tests.reliability.case import Case
from tests.reliability.cases.common import FAST, refused


def _case(name: str, what: str, args: list[str], line: str, **kwargs) -> Case:
    return Case("config", name, what, refused(line), args=["logger=none", *args], **kwargs)


CASES = [
    _case(
        "unknown-key",
        "a typo in a key",
        ["trainer.epoch=3"],
        r"trainer\.epoch: no such key; allowed keys there: epochs",
    ),
    _case("added-unknown-key", "a new key added with +", ["+trainer.extra=1"], r"trainer\.extra.*no such key"),
    _case(
        "key-of-another-choice",
        "a key of the synthetic dataset with dataset=cora",
        ["dataset=cora", "dataset.num_nodes=500"],
        r"dataset\.num_nodes.*(no such key|not).*",
    ),
    _case("unknown-choice", "a dataset that does not exist", ["dataset=nosuch"], r"dataset=nosuch.*cora"),
    _case(
        "name-without-choice",
        "dataset.name set instead of dataset=",
        ["dataset.name=nosuch"],
        r"dataset\.name.*synthetic",
    ),
    _case("unknown-experiment", "a preset that does not exist", ["experiment=nosuch"], r"experiment=nosuch.*adaqp"),
    _case("wrong-type", "a word where a number belongs", ["trainer.epochs=abc"], r"trainer\.epochs.*(Integer|integer)"),
    _case("negative-epochs", "an out-of-range value", ["trainer.epochs=-3"], r"trainer\.epochs.*>= 1"),
    _case("zero-ranks", "no rank at all", ["cluster.nproc=0"], r"cluster\.nproc.*>= 1"),
    _case(
        "more-ranks-than-nodes",
        "more partitions than nodes",
        ["cluster.nproc=9", "dataset.num_nodes=8"],
        r"cluster\.nproc=9 .* 8 nodes",
    ),
    _case("bad-enum", "a value not in the list", ["model.norm=batch"], r"model\.norm.*layer"),
    _case("negative-lr", "a negative learning rate", ["trainer.lr=-1"], r"trainer\.lr.*(>|must)"),
    _case("nan-lr", "a learning rate that is not a number", ["trainer.lr=nan"], r"trainer\.lr.*finite"),
    _case(
        "bad-bit-width",
        "a bit width the codec has no code for",
        ["quantizer=uniform", "quantizer.bits=3"],
        r"quantizer\.bits=3 is not allowed; allowed: .*8",
    ),
    _case("train-frac-above-one", "a split fraction above 1", ["dataset.train_frac=1.5"], r"dataset\.train_frac"),
    _case("dropout-above-one", "a dropout probability above 1", ["model.dropout=1.5"], r"model\.dropout"),
    _case(
        "zero-memory-limit",
        "cluster.memory_limit_gib=0",
        ["cluster.memory_limit_gib=0"],
        r"cluster\.memory_limit_gib=0\.0 is not allowed; it must be null or > 0",
    ),
    _case("zero-timeout", "a collective timeout of 0 s", ["cluster.timeout_s=0"], r"cluster\.timeout_s"),
    _case(
        "admm-with-gcn",
        "a combination that cannot run: parallel=admm with model=gcn",
        ["parallel=admm"],
        r"parallel=admm is not allowed with model=gcn",
    ),
    _case(
        "checkpoints-with-minibatch",
        "checkpoints where the strategy has none",
        ["parallel=minibatch", "cluster.nproc=1", "trainer.checkpoint_every=5"],
        r"trainer\.checkpoint_every=5 is not supported with parallel=minibatch",
    ),
    _case("files-without-path", "dataset=files without dataset.path", ["dataset=files"], r"dataset\.path is required"),
    _case(
        "bad-sweep-point",
        "one bad point of a sweep stops the sweep before any point runs",
        ["-m", *FAST[1:], "trainer.lr=0.01,-1"],
        r"trainer\.lr",
    ),
    _case("unparsable-override", "an override Hydra cannot parse", ["trainer.epochs=[1,2"], r"trainer\.epochs"),
    _case(
        "unknown-sweep-file",
        "a sweep file that does not exist",
        ["-m", "--config-dir", "sweeps", "--config-name", "nosuch"],
        r"nosuch.*(allowed|available|sweeps:)",
    ),
]


# --- issue 31, items 5, 6 and 8; issue 32, item 1 ---

BAD_SWEEP_YAML = """defaults:
  - config
  - _self_
hydra:
  sweeper:
    params:
      trainer.seed: 0,1
     model.hidden: [16
"""


def _bad_sweep_file(ctx) -> None:
    (ctx.root / "bad_sweep.yaml").write_text(BAD_SWEEP_YAML)


CASES += [
    _case(
        "empty-sweep-axis",
        "gnnq -m trainer.seed= (issue 31.5)",
        ["-m", *FAST[1:], "trainer.seed="],
        r"trainer\.seed=: this sweep axis has no value; give one or more",
    ),
    _case(
        "empty-sweep-range",
        "gnnq -m trainer.seed='range(0,0)' (issue 31.5; an IndexError before)",
        ["-m", *FAST[1:], "trainer.seed=range(0,0)"],
        r"trainer\.seed=range\(0,0\): this sweep axis has no value",
    ),
    Case(
        "config",
        "sweep-file-yaml-error",
        "a sweep file with a YAML syntax error (issue 31.5): the file and its line",
        refused(r"bad_sweep\.yaml, line 8, column 6: not valid YAML"),
        args=lambda ctx: ["logger=none", f"sweep={ctx.root / 'bad_sweep.yaml'}"],
        setup=_bad_sweep_file,
    ),
    _case(
        "timeout-beyond-range",
        "cluster.timeout_s=1e14 (issue 31.5; an OverflowError in rank 0 before)",
        [*FAST[1:], "cluster.timeout_s=100000000000000"],
        r"cluster\.timeout_s=100000000000000 is not allowed; it must be <= 2592000 \(allowed: 1\.\.2592000\)",
    ),
    _case(
        "dataset-chosen-twice",
        "dataset=cora dataset=citeseer (issue 31.6; CiteSeer ran before)",
        ["dataset=cora", "dataset=citeseer"],
        r"dataset is chosen twice: dataset=cora and dataset=citeseer",
    ),
    _case(
        "experiment-chosen-twice",
        "experiment=adaqp experiment=cora_gcn (issue 31.6)",
        ["experiment=adaqp", "experiment=cora_gcn"],
        r"experiment is chosen twice: experiment=adaqp and experiment=cora_gcn",
    ),
    _case(
        "non-ascii-path-override",
        "dataset.path with non-ASCII letters, unquoted (issue 31.8): how to quote it, and GNNQ_FILES_PATH",
        ["dataset=files", "dataset.path=/data/gräph"],
        r"cannot parse override 'dataset\.path=/data/gräph'.*quote the value.*\"dataset\.path='/data/gräph'\".*"
        r"GNNQ_FILES_PATH",
    ),
    _case(
        "assign-cycle-not-shorter",
        "an explicit quantizer.assign_cycle=50 with trainer.epochs=30 (issue 32.1): the way out named",
        ["experiment=adaqp", "quantizer.assign_cycle=50", "trainer.epochs=30"],
        r"quantizer\.assign_cycle=50 is not allowed with trainer\.epochs=30.*leave it out.*here 7.*"
        r"\+\+quantizer\.assign_cycle",
    ),
    _case(
        "method-key-in-mixed-sweep",
        "quantizer.assign_cycle=10 in a sweep over adaqp_vanilla,adaqp (issue 32.1): names ++",
        ["-m", *FAST[1:], "experiment=adaqp_vanilla,adaqp", "quantizer.assign_cycle=10"],
        r"quantizer\.assign_cycle: no such key for quantizer=fp32.*only in the sweep's points whose choice has it: "
        r"\+\+quantizer\.assign_cycle=10",
    ),
]
