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
