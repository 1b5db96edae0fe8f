"""Bad data: stops before any rank starts with one line naming the file (or the keys that made the split),
exit 1, a failed record, and the user's files unchanged (docs/runs.md "Bad data"); label gaps and a
diverging loss (trainer.nonfinite_loss) too."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import numpy as np

from tests.reliability.case import Case, Expect
from tests.reliability.cases.common import FAST, failed
from tests.reliability.context import Context

FILES = [a for a in FAST if not a.startswith("dataset.")]  # dataset=files has no dataset.num_nodes
SHARED_PLANETOID = [
    Path(__file__).resolve().parents[4].parent / "shared" / "datasets" / "planetoid",
    Path("/work/shared/datasets/planetoid"),
]


def _digests(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


def _files_case(name: str, what: str, damage, expect: Expect, extra: list[str] = ()) -> Case:
    """A dataset=files graph damaged by ``damage(dir)``; its files must be left as they were."""

    def setup(ctx: Context) -> None:
        d = ctx.graph()
        damage(d)
        ctx.state["digests"] = _digests(d)

    def verify(ctx: Context, _) -> list[str]:
        return [] if _digests(ctx.root / "graph") == ctx.state["digests"] else ["the dataset's files were changed"]

    args = lambda ctx: [*FILES, "dataset=files", f"dataset.path={ctx.root / 'graph'}", *extra]  # noqa: E731
    return Case("data", name, what, expect, args=args, setup=setup, verify=verify)


def nan_features(d: Path) -> None:
    x = np.load(d / "features.npy")
    x[5, 2], x[9, 0] = np.nan, np.inf
    np.save(d / "features.npy", x)


def empty_train(d: Path) -> None:
    (d / "train.txt").write_text("")
    (d / "val.txt").write_text("3\n4\n")
    (d / "test.txt").write_text("5\n6\n")


def two_nodes(d: Path) -> None:
    (d / "edges.txt").write_text("0 1\n")
    np.save(d / "features.npy", np.ones((2, 3), dtype=np.float32))
    np.save(d / "labels.npy", np.array([0, 1]))


def _rewrite(name: str, fn):
    def damage(d: Path) -> None:
        np.save(d / name, fn(np.load(d / name, allow_pickle=False)))

    return damage


def _splits(train: str, val: str, test: str | None):
    def damage(d: Path) -> None:
        for part, ids in (("train", train), ("val", val), ("test", test)):
            if ids is not None:
                (d / f"{part}.txt").write_text(ids)

    return damage


def _object_npy(d: Path) -> None:
    np.save(d / "features.npy", np.array([{"a": 1}] * 40, dtype=object), allow_pickle=True)


def _with_label_gap(d: Path) -> None:
    y = np.load(d / "labels.npy")
    y[0] = 999
    np.save(d / "labels.npy", y)


def _copy_cora(ctx: Context) -> Path:
    src = next((p for p in SHARED_PLANETOID if (p / "Cora" / "raw").is_dir()), None)
    if src is None:
        raise FileNotFoundError(f"raw Cora files not found under {SHARED_PLANETOID[0]}")
    shutil.copytree(src / "Cora" / "raw", ctx.data / "Cora" / "raw")
    return ctx.data / "Cora" / "raw"


def _damaged_cora(ctx: Context) -> None:
    raw = _copy_cora(ctx) / "ind.cora.x"
    data = bytearray(raw.read_bytes())
    data[len(data) // 2] ^= 0x01
    raw.write_bytes(bytes(data))


F = "files: "
CASES = [
    _files_case(
        "nan-features",
        "NaN and inf in features.npy",
        nan_features,
        failed(F + r".*features\.npy holds 2 NaN or infinite value\(s\) \(first: node 5, feature 2, nan\)"),
    ),
    _files_case(
        "empty-train-split",
        "an empty train.txt",
        empty_train,
        failed(F + r"the train split is empty .*train\.txt lists no node.*train 0, val 2, test 2 of 40"),
    ),
    _files_case(
        "no-val-no-test",
        "a 2-node graph: the seeded split leaves val and test empty",
        two_nodes,
        failed(F + r"the val split is empty .*dataset\.train_frac=0\.6.*train 2, val 0, test 0 of 2"),
    ),
    _files_case(
        "single-class",
        "every node in class 0",
        _rewrite("labels.npy", np.zeros_like),
        failed(F + r".*labels\.npy has a single class \(class 0 for all 40 nodes\)"),
    ),
    _files_case(
        "garbage-npy",
        "features.npy holds CSV text",
        lambda d: (d / "features.npy").write_bytes(b"node,f\n0,1.0\n" * 20),
        failed(F + r".*features\.npy is not a valid \.npy file.*numpy\.save"),
    ),
    _files_case(
        "object-npy",
        "features.npy holds pickled Python objects",
        _object_npy,
        failed(F + r".*features\.npy holds Python objects"),
    ),
    _files_case(
        "feature-rows-mismatch",
        "30 feature rows for 40 labels",
        _rewrite("features.npy", lambda x: x[:30]),
        failed(F + r"features\.npy has 30 rows but labels\.npy has 40"),
    ),
    _files_case(
        "negative-class-id",
        "a label -1",
        _rewrite("labels.npy", lambda y: np.where(np.arange(len(y)) == 0, -1, y)),
        failed(F + r".*labels\.npy holds a negative class id \(-1\)"),
    ),
    _files_case(
        "edge-to-missing-node",
        "an edge to node 1000 of 40",
        lambda d: (d / "edges.txt").write_text("0 1\n1 1000\n"),
        failed(F + r".*edges\.txt refers to node 1000.*0\.\.39"),
    ),
    _files_case(
        "node-in-two-splits",
        "node 3 in train.txt and test.txt",
        _splits("0\n1\n3\n", "4\n5\n", "3\n6\n"),
        failed(F + r"node 3 is in both train\.txt and test\.txt"),
    ),
    _files_case(
        "partial-split-files",
        "train.txt and val.txt without test.txt",
        _splits("0\n1\n", "4\n5\n", None),
        failed(F + r".*has train\.txt, val\.txt but not test\.txt"),
    ),
    _files_case(
        "split-node-out-of-range",
        "train.txt names node 99 of 40",
        _splits("0\n99\n", "4\n5\n", "6\n"),
        failed(F + r".*train\.txt refers to node 99"),
    ),
    _files_case(
        "missing-labels",
        "no labels file",
        lambda d: (d / "labels.npy").unlink(),
        failed(F + r"no labels file in .*graph"),
    ),
    _files_case(
        "label-gaps",
        "class ids with gaps train, with one warning",
        _with_label_gap,
        Expect(exit=0, records=("ok",), warning=r"files: 996 of 1,000 classes have no node"),
    ),
    Case(
        "data",
        "path-is-a-file",
        "dataset.path names a file",
        failed(F + r"dataset\.path .*edges\.txt is not a directory"),
        args=lambda ctx: [*FILES, "dataset=files", f"dataset.path={ctx.root / 'graph' / 'edges.txt'}"],
        setup=lambda ctx: ctx.graph(),
    ),
    Case(
        "data",
        "synthetic-empty-split",
        "8 classes on 16 nodes: val gets no node",
        failed(r"synthetic: the val split is empty.*train 8, val 0, test 8"),
        args=[*FAST, "dataset.num_nodes=16", "dataset.num_classes=8"],
    ),
    Case(
        "data",
        "missing-raw-files",
        "dataset=cora without its files and with dataset.download=false",
        failed(r".*ind\.cora"),
        args=["logger=none", "dataset=cora", "dataset.download=false"],
    ),
    Case(
        "data",
        "damaged-raw-file",
        "a Cora raw file with one bit flipped, dataset.download=false",
        failed(r".*ind\.cora\.x.*sha256"),
        args=["logger=none", "dataset=cora", "dataset.download=false"],
        setup=_damaged_cora,
    ),
    Case(
        "data",
        "nonfinite-loss",
        "lr=1e30 without norm: the loss is NaN at epoch 2",
        failed(r"the training loss is nan at epoch 2"),
        args=[
            "logger=none",
            "dataset.num_nodes=600",
            "model.hidden=16",
            "model.norm=none",
            "trainer.lr=1e30",
            "trainer.epochs=4",
        ],
    ),
    Case(
        "data",
        "nonfinite-loss-warn",
        "the same with trainer.nonfinite_loss=warn: goes on, warns",
        Expect(exit=0, records=("ok",), warning=r"the training loss is nan at epoch 2"),
        args=[
            "logger=none",
            "dataset.num_nodes=600",
            "model.hidden=16",
            "model.norm=none",
            "trainer.lr=1e30",
            "trainer.epochs=3",
            "trainer.nonfinite_loss=warn",
        ],
    ),
]


# --- issue 31, items 1-4 and 8-9: BOMs, the bad line named, huge ids, numbers beyond float32, paths, a full disk ---

RING = [(i, (i + 1) % 40) for i in range(40)]  # 40 distinct edges, no self loop, no duplicate


def _bom_edges_csv(d: Path) -> None:
    """edges.csv as a spreadsheet saves it: a UTF-8 byte-order mark, no header."""
    (d / "edges.txt").unlink()
    (d / "edges.csv").write_bytes(b"\xef\xbb\xbf" + "".join(f"{a},{b}\n" for a, b in RING).encode())


def _bom_labels_csv(d: Path) -> None:
    y = np.load(d / "labels.npy")
    (d / "labels.npy").unlink()
    (d / "labels.csv").write_bytes(b"\xef\xbb\xbf" + "".join(f"{int(c)}\n" for c in y).encode())


def _every_edge_kept(ctx: Context, outcome) -> list[str]:
    """All 40 ring edges (80 after symmetrizing) reached the run, and no line was dropped as a header."""
    problems = [f"a line was dropped: {w}" for w in outcome.warnings() if "header" in w]
    if not re.search(r"dataset files: 40 nodes, 80 edges", outcome.proc.stdout):
        found = re.search(r"dataset files: .*", outcome.proc.stdout)
        problems.append(f"not every edge was kept: {found.group(0) if found else 'no dataset line'}")
    return problems


def _bad_token_at_line_50001(d: Path) -> None:
    lines = [f"{i % 40} {(i * 7 + 1) % 40}" for i in range(100_000)]
    lines[50_000] = "17 x9"
    (d / "edges.txt").write_text("\n".join(lines) + "\n")


def _huge_class_id(d: Path) -> None:
    y = np.load(d / "labels.npy")
    y[7] = 1_000_000_000
    np.save(d / "labels.npy", y)


def _features_1e300(d: Path) -> None:
    x = np.load(d / "features.npy").astype(np.float64)
    x[3, 1] = 1e300
    np.save(d / "features.npy", x)


def _path_case(name: str, what: str, folder: str, via_env: bool) -> Case:
    """A graph in a folder whose name Hydra's override grammar needs quoted (or not), given one way or the other."""

    def setup(ctx: Context) -> None:
        ctx.graph(folder)
        if via_env:
            ctx.env["GNNQ_FILES_PATH"] = str(ctx.root / folder)

    def args(ctx: Context) -> list[str]:
        return [*FILES, "dataset=files"] + ([] if via_env else [f"dataset.path={ctx.root / folder}"])

    return Case("data", name, what, Expect(exit=0, records=("ok",)), args=args, setup=setup)


def _small_data_root(ctx: Context) -> None:
    """Cora's raw files on a 2 MiB tmpfs: they fit (0.6 MiB), PyG's processed/data.pt (15 MiB) does not."""
    small = ctx.mount(ctx.root / "small-data", ["-t", "tmpfs", "-o", "size=2m", "tmpfs"])
    src = next((p for p in SHARED_PLANETOID if (p / "Cora" / "raw").is_dir()), None)
    if src is None:
        raise FileNotFoundError(f"raw Cora files not found under {SHARED_PLANETOID[0]}")
    shutil.copytree(src / "Cora" / "raw", small / "Cora" / "raw")
    ctx.state["digests"] = _digests(small / "Cora" / "raw")
    ctx.env["GNNQ_DATA"] = str(small)


def _raw_kept_and_not_blamed(ctx: Context, outcome) -> list[str]:
    problems = [] if _digests(ctx.root / "small-data" / "Cora" / "raw") == ctx.state["digests"] else ["raw changed"]
    if re.search(r"delete|corrupt|truncated", outcome.last_line):
        problems.append("the line blames or would delete the intact raw files")
    if (ctx.root / "small-data" / "Cora" / "processed").exists():
        problems.append("a half-written processed/ was left")
    return problems


CASES += [
    _files_case(
        "bom-edges-csv",
        "edges.csv saved with a UTF-8 byte-order mark (issue 31.1): every edge kept",
        _bom_edges_csv,
        Expect(exit=0, records=("ok",)),
    ),
    _files_case(
        "bom-labels-csv",
        "labels.csv saved with a UTF-8 byte-order mark (issue 31.1): every label kept",
        _bom_labels_csv,
        Expect(exit=0, records=("ok",)),
    ),
    _files_case(
        "bad-token-line-named",
        "one bad token on line 50,001 of a 100,000-edge file (issue 31.2)",
        _bad_token_at_line_50001,
        failed(F + r".*edges\.txt .*line 50,?001.*x9"),
    ),
    _files_case(
        "huge-class-id",
        "a class id of 1,000,000,000 (issue 31.3): refused naming the file and the id, no huge arrays",
        _huge_class_id,
        failed(F + r".*labels\.npy holds class id 1000000000, but the graph has 40 nodes"),
    ),
    _files_case(
        "edge-id-1e20",
        "an edge to node 1e20 (issue 31.4): the number as given, its line and the allowed range, no int64 overflow",
        lambda d: (d / "edges.txt").write_text("0 1\n1 1e20\n"),
        failed(F + r".*edges\.txt refers to node 1e20 \(line 2\), but .*\(node ids must be 0\.\.39\)"),
    ),
    _files_case(
        "feature-1e300",
        "a float64 feature of 1e300 (issue 31.4): said to be beyond float32, not NaN",
        _features_1e300,
        failed(F + r".*features\.npy holds 1e\+300 \(node 3, feature 1\), beyond float32's range"),
    ),
    _path_case("path-with-space", "dataset.path with a space (issue 31.8)", "my graph", via_env=False),
    _path_case(
        "non-ascii-path-by-env",
        "a non-ASCII folder given as GNNQ_FILES_PATH, no quoting (issue 31.8)",
        "gräph-données",
        via_env=True,
    ),
    Case(
        "data",
        "disk-full-writing-processed",
        "Cora's raw files on a 2 MiB tmpfs: PyG's processed/ does not fit (issue 31.9)",
        failed(r"cora: cannot write .*Cora/processed \(No space left on device \(ENOSPC\)\); the raw files .* intact"),
        args=["logger=none", "dataset=cora", "dataset.download=false", "trainer.epochs=1"],
        setup=_small_data_root,
        verify=_raw_kept_and_not_blamed,
    ),
]
