"""Dataset loaders through the real code paths: PyG Planetoid, OGB, bring-your-own files, synthetic."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnq.config.registry import DATASETS
from gnnq.config.schema import DatasetConfig
from gnnq.config.typed import option_config
from gnnq.data.loaders import canonical_edges
from gnnq.data.loaders import ogb as ogb_loader
from gnnq.data.loaders.ogb import ogb_evaluator_accuracy
from gnnq.data.registry import data_root, dataset_names, expected_num_nodes, load_dataset
from gnnq.data.splits import stratified_split
from gnnq.errors import ConfigError, DatasetError
from tests.helpers import make_ogbn_arxiv
from tests.reliability.files_graph import write_files_graph

REPO = Path(__file__).resolve().parents[2]


def cfg(name: str, **kw) -> DatasetConfig:
    return (DATASETS.schema(name) if name in DATASETS else DatasetConfig)(name=name, **kw)


def error_line(excinfo) -> str:
    msg = str(excinfo.value)
    assert msg and "\n" not in msg, f"error message must be one line: {msg!r}"
    return msg


def symmetric(edge_index: np.ndarray, n: int) -> bool:
    fwd = set((edge_index[0] * n + edge_index[1]).tolist())
    return fwd == set((edge_index[1] * n + edge_index[0]).tolist())


# --- registry ---------------------------------------------------------------------------


def test_names_and_dataset_configs():
    names = dataset_names()
    assert names == [
        "cora",
        "citeseer",
        "pubmed",
        "reddit",
        "flickr",
        "yelp",
        "amazon-products",
        "ogbn-arxiv",
        "ogbn-products",
        "amazon-computers",
        "amazon-photo",
        "coauthor-cs",
        "coauthor-physics",
        "files",
        "synthetic",
    ]
    for name in names:
        assert option_config("dataset", name).name == name
    large = option_config("dataset", "synthetic-large")
    assert large.name == "synthetic" and large.num_nodes >= 200_000


def test_unknown_dataset_lists_names():
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("coraa"))
    assert "coraa" in error_line(e) and "cora, citeseer" in str(e.value)
    with pytest.raises(DatasetError):
        expected_num_nodes(cfg("coraa"))


def test_data_root_precedence(monkeypatch, tmp_path):
    monkeypatch.setenv("GNNQ_DATA", str(tmp_path / "env"))
    assert data_root(cfg("cora", root=str(tmp_path / "explicit"))) == tmp_path / "explicit"
    assert data_root(cfg("cora")) == tmp_path / "env"
    monkeypatch.delenv("GNNQ_DATA")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert data_root(cfg("cora")) == tmp_path / "home" / ".cache" / "gnnq" / "data"
    assert data_root(cfg("cora", root="~/d")) == tmp_path / "home" / "d"


def test_expected_num_nodes_is_cheap(tmp_path):
    assert expected_num_nodes(cfg("cora", root=str(tmp_path))) == 2708
    assert expected_num_nodes(cfg("ogbn-products", root=str(tmp_path))) == 2449029
    assert expected_num_nodes(cfg("synthetic", num_nodes=1234)) == 1234
    assert expected_num_nodes(cfg("files", path=str(tmp_path))) is None
    assert list(tmp_path.iterdir()) == []  # nothing loaded or downloaded


def test_canonical_edges_dedupes_and_drops_self_loops():
    ei = np.array([[0, 0, 1, 2, 2], [1, 1, 1, 0, 1]])
    assert canonical_edges(ei, 3).tolist() == [[0, 2, 2], [1, 0, 1]]
    und = canonical_edges(ei, 3, undirected=True)
    assert und.dtype == np.int64 and symmetric(und, 3) and und.shape[1] == 6


# --- PyG Planetoid ----------------------------------------------------------------------


def test_cora(planetoid_root):
    g = load_dataset(cfg("cora", root=str(planetoid_root), download=False))
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (2708, 10556, 1433, 7)
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (140, 500, 1000)
    assert g.metric == "accuracy" and not g.multilabel and symmetric(g.edge_index, g.num_nodes)
    assert not (g.edge_index[0] == g.edge_index[1]).any()
    again = load_dataset(cfg("cora", root=str(planetoid_root), download=False))  # from PyG's processed cache
    assert again.fingerprint() == g.fingerprint()


def test_citeseer_with_isolated_nodes(planetoid_root):
    g = load_dataset(cfg("citeseer", root=str(planetoid_root), download=False))
    assert (g.num_nodes, g.num_edges, g.num_features, g.num_classes) == (3327, 9104, 3703, 6)
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (120, 500, 1000)
    degree = np.bincount(g.edge_index[0], minlength=g.num_nodes)
    assert (degree == 0).sum() == 48


def test_missing_planetoid_files_fail_fast(tmp_path):
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("cora", root=str(tmp_path), download=False))
    msg = error_line(e)
    assert str(tmp_path / "Cora" / "raw") in msg
    for part in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"):
        assert f"ind.cora.{part}" in msg


def test_partly_missing_planetoid_files_named(planetoid_root, tmp_path):
    shutil.copytree(planetoid_root / "Cora" / "raw", tmp_path / "Cora" / "raw")
    (tmp_path / "Cora" / "raw" / "ind.cora.ty").unlink()
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("cora", root=str(tmp_path), download=False))
    assert "(missing: ind.cora.ty)" in error_line(e)


@pytest.mark.parametrize("victim", ["ind.cora.graph", "ind.cora.x"])
def test_truncated_planetoid_file(planetoid_root, tmp_path, victim):
    raw = tmp_path / "Cora" / "raw"
    shutil.copytree(planetoid_root / "Cora" / "raw", raw)
    path = raw / victim
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("cora", root=str(tmp_path), download=False))
    msg = error_line(e)
    assert msg.startswith("cora: ") and str(path) in msg


def test_missing_saint_files_fail_fast(tmp_path):
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("yelp", root=str(tmp_path), download=False))
    msg = error_line(e)
    assert str(tmp_path / "Yelp" / "raw") in msg and "adj_full.npz" in msg and "role.json" in msg


# --- OGB ----------------------------------------------------------------------------------


def test_ogb_loader_twice_second_from_cache(tmp_path, monkeypatch):
    ref = make_ogbn_arxiv(tmp_path)
    c = cfg("ogbn-arxiv", root=str(tmp_path), download=False, to_undirected=False)
    g = load_dataset(c)
    n = 60
    assert (g.num_nodes, g.num_features, g.num_classes, g.metric) == (n, 8, 40, "accuracy")
    np.testing.assert_allclose(g.x, ref["x"], rtol=1e-6)
    assert np.array_equal(g.y, ref["y"]) and g.y.dtype == np.int64
    expected = canonical_edges(ref["edges"].T, n)
    assert np.array_equal(g.edge_index, expected)
    for mask, part in ((g.train_mask, "train"), (g.val_mask, "valid"), (g.test_mask, "test")):
        assert np.array_equal(np.flatnonzero(mask), np.sort(ref["split"][part]))
    assert (tmp_path / "ogbn_arxiv" / "processed" / "data_processed").is_file()  # OGB's own cache

    import ogb.nodeproppred as onp

    def no_ogb(*a, **k):
        raise AssertionError("second load must come from gnnq's cache, not OGB's pickle")

    monkeypatch.setattr(onp, "NodePropPredDataset", no_ogb)
    assert load_dataset(c).fingerprint() == g.fingerprint()
    monkeypatch.undo()

    # Without gnnq's cache, OGB's stale pickle (unloadable under torch>=2.6) is not used either.
    ogb_loader.layout("ogbn-arxiv", tmp_path).cache_file.unlink()
    assert load_dataset(c).fingerprint() == g.fingerprint()

    und = load_dataset(cfg("ogbn-arxiv", root=str(tmp_path), download=False))
    assert symmetric(und.edge_index, n) and und.num_edges >= g.num_edges


def test_ogb_missing_release_marker_does_not_prompt(tmp_path):
    make_ogbn_arxiv(tmp_path)
    (tmp_path / "ogbn_arxiv" / "RELEASE_v1.txt").unlink()
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("ogbn-arxiv", root=str(tmp_path), download=False))
    assert "RELEASE_v1.txt" in error_line(e)


def test_ogb_missing_files_fail_fast(tmp_path):
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("ogbn-arxiv", root=str(tmp_path), download=False))
    msg = error_line(e)
    assert str(tmp_path / "ogbn_arxiv") in msg and "raw/edge.csv.gz" in msg and "split/time/train.csv.gz" in msg


def test_ogb_corrupt_file(tmp_path):
    make_ogbn_arxiv(tmp_path)
    path = tmp_path / "ogbn_arxiv" / "raw" / "node-feat.csv.gz"
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("ogbn-arxiv", root=str(tmp_path), download=False))
    assert str(tmp_path / "ogbn_arxiv") in error_line(e)


def test_ogb_evaluator_accuracy_matches_counting():
    rng = np.random.default_rng(0)
    y_true = rng.integers(0, 40, size=500)
    y_pred = np.where(rng.random(500) < 0.7, y_true, rng.integers(0, 40, size=500))
    expected = float((y_true == y_pred).mean())
    assert ogb_evaluator_accuracy("ogbn-arxiv", y_true, y_pred) == pytest.approx(expected)
    assert ogb_evaluator_accuracy(
        "ogbn-products", torch.from_numpy(y_true), torch.from_numpy(y_pred)[:, None]
    ) == pytest.approx(expected)


# --- bring your own graph -------------------------------------------------------------------


@pytest.mark.parametrize("csv", [False, True])
def test_files_without_split_is_stratified(tmp_path, csv):
    edges, x, y = write_files_graph(tmp_path / "g", csv=csv)
    c = cfg("files", path=str(tmp_path / "g"), to_undirected=False, train_frac=0.5, val_frac=0.25, seed=3)
    g = load_dataset(c)
    assert (g.num_nodes, g.num_features, g.num_classes, g.metric) == (40, 5, 3, "accuracy")
    np.testing.assert_allclose(g.x, x, rtol=1e-6)
    assert np.array_equal(g.y, y)
    assert np.array_equal(g.edge_index, canonical_edges(edges.T, 40))
    assert (g.train_mask.sum(), g.val_mask.sum(), g.test_mask.sum()) == (21, 10, 9)
    assert not (g.train_mask & g.val_mask).any() and (g.train_mask | g.val_mask | g.test_mask).all()
    for k in range(3):
        assert g.train_mask[g.y == k].sum() == 7
    assert load_dataset(c).fingerprint() == g.fingerprint()
    assert load_dataset(cfg("files", path=str(tmp_path / "g"), seed=4)).fingerprint() != g.fingerprint()
    assert symmetric(load_dataset(cfg("files", path=str(tmp_path / "g"))).edge_index, 40)


def test_files_with_split(tmp_path):
    d = tmp_path / "g"
    write_files_graph(d)
    (d / "train.txt").write_text("0\n1\n2\n")
    (d / "val.txt").write_text("3\n4\n")
    (d / "test.txt").write_text("# held out\n5\n6\n7\n8\n")
    g = load_dataset(cfg("files", path=str(d)))
    assert np.flatnonzero(g.train_mask).tolist() == [0, 1, 2]
    assert np.flatnonzero(g.val_mask).tolist() == [3, 4]
    assert np.flatnonzero(g.test_mask).tolist() == [5, 6, 7, 8]


@pytest.mark.parametrize("csv", [False, True])
def test_files_multilabel(tmp_path, csv):
    _, _, y = write_files_graph(tmp_path / "g", classes=4, multilabel=True, csv=csv)
    g = load_dataset(cfg("files", path=str(tmp_path / "g")))
    assert g.multilabel and g.metric == "micro_f1" and g.num_classes == 4
    assert g.y.dtype == np.float32 and np.array_equal(g.y, y.astype(np.float32))


def test_files_errors(tmp_path):
    def fails(path, *needles):
        with pytest.raises(DatasetError) as e:
            load_dataset(cfg("files", path=str(path) if path else None))
        msg = error_line(e)
        for needle in needles:
            assert needle in msg, msg

    fails(None, "dataset.path")
    fails(tmp_path / "nope", str(tmp_path / "nope"), "edges.txt or edges.csv", "features.npy or features.csv")
    d = tmp_path / "g"
    write_files_graph(d)
    (d / "edges.txt").rename(d / "edges.bak")
    fails(d, "edges.txt or edges.csv")
    (d / "edges.bak").rename(d / "edges.txt")
    (d / "labels.npy").rename(d / "labels.bak")
    fails(d, "labels.npy or labels.csv")
    np.save(d / "labels.npy", np.zeros(39, dtype=np.int64))
    fails(d, "features.npy has 40 rows", "labels.npy has 39")
    (d / "labels.bak").replace(d / "labels.npy")
    with open(d / "edges.txt", "a") as f:
        f.write("3 40\n")
    fails(d, "edges.txt", "node 40", "0..39")
    write_files_graph(d)
    (d / "train.txt").write_text("0\n1\n")
    fails(d, "val.txt", "test.txt")
    (d / "val.txt").write_text("2\n")
    (d / "test.txt").write_text("-1\n")
    fails(d, "test.txt", "node -1")
    (d / "test.txt").write_text("1\n")
    fails(d, "node 1", "train.txt", "test.txt")
    (d / "test.txt").write_text("3\n")
    assert load_dataset(cfg("files", path=str(d))).test_mask.sum() == 1
    (d / "edges.txt").write_text("0 1 2\n")
    fails(d, "two columns")
    (d / "edges.txt").write_text("0 x\n")
    fails(d, "edges.txt", "not a number")
    (d / "edges.txt").write_text("0 1\n")
    (d / "features.csv").write_text("1.0\n")
    fails(d, "features.npy and features.csv")


def test_bad_split_fractions_are_config_errors(tmp_path):
    write_files_graph(tmp_path / "g")
    with pytest.raises(ConfigError) as e:
        load_dataset(cfg("files", path=str(tmp_path / "g"), train_frac=0.9, val_frac=0.2))
    assert "dataset.train_frac" in error_line(e)


def test_stratified_split_small_classes_keep_a_train_node():
    y = np.array([0] * 10 + [1] * 2 + [2])
    train, val, test = stratified_split(y, 0.6, 0.2, seed=0)
    assert [train[y == k].sum() for k in range(3)] == [6, 1, 1]
    assert not (train & val).any() and not (train & test).any() and (train | val | test).all()


# --- synthetic ----------------------------------------------------------------------------


def test_synthetic_deterministic_per_seed():
    small = dict(num_nodes=3000, avg_degree=8.0)
    a = load_dataset(cfg("synthetic", seed=1, **small))
    b = load_dataset(cfg("synthetic", seed=1, **small))
    c = load_dataset(cfg("synthetic", seed=2, **small))
    assert a.fingerprint() == b.fingerprint() != c.fingerprint()
    assert a.num_nodes == 3000 and a.x.dtype == np.float32 and symmetric(a.edge_index, 3000)
    assert 7.0 < a.num_edges / a.num_nodes <= 8.0
    assert np.bincount(a.y).tolist() == [375] * 8


def test_synthetic_bad_values_are_config_errors():
    with pytest.raises(ConfigError) as e:
        load_dataset(cfg("synthetic", homophily=1.5))
    assert "dataset.homophily" in error_line(e)


def _train_2layer(g, use_graph: bool, epochs: int = 60, hidden: int = 64) -> float:
    """Test accuracy at the best validation epoch of a 2-layer GCN (or MLP when not use_graph)."""
    torch.manual_seed(0)
    n = g.num_nodes
    loops = torch.arange(n)
    dst = torch.cat([torch.from_numpy(g.edge_index[1]), loops])
    src = torch.cat([torch.from_numpy(g.edge_index[0]), loops])
    deg = torch.bincount(dst, minlength=n).float()
    adj = torch.sparse_coo_tensor(
        torch.stack([dst, src]), deg[dst].rsqrt() * deg[src].rsqrt(), (n, n), check_invariants=False
    ).coalesce()
    x, y = torch.from_numpy(g.x), torch.from_numpy(g.y)
    lin1, lin2 = torch.nn.Linear(g.num_features, hidden), torch.nn.Linear(hidden, g.num_classes)
    opt = torch.optim.Adam([*lin1.parameters(), *lin2.parameters()], lr=0.01, weight_decay=5e-4)
    prop = (lambda h: torch.sparse.mm(adj, h)) if use_graph else (lambda h: h)
    masks = [torch.from_numpy(m) for m in (g.train_mask, g.val_mask, g.test_mask)]

    def forward(train: bool):
        h = torch.relu(prop(lin1(x)))
        return prop(lin2(torch.nn.functional.dropout(h, 0.5, train)))

    best_val, test_at_best = -1.0, 0.0
    for _ in range(epochs):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(forward(True)[masks[0]], y[masks[0]]).backward()
        opt.step()
        with torch.no_grad():
            pred = forward(False).argmax(1)
        val, test = ((pred[m] == y[m]).float().mean().item() for m in masks[1:])
        if val > best_val:
            best_val, test_at_best = val, test
    return test_at_best


def test_synthetic_default_gcn_beats_mlp():
    conf = option_config("dataset", "synthetic")
    g = load_dataset(conf)
    assert g.num_nodes == 10000
    gcn, mlp = _train_2layer(g, True), _train_2layer(g, False)
    assert gcn >= mlp + 0.25, (gcn, mlp)
    assert gcn >= 0.75, (gcn, mlp)


@pytest.mark.parametrize(
    "workload, degree, dim, classes", [("reddit-like", 40.0, 602, 41), ("products-like", 12.0, 100, 47)]
)
def test_adaqp_shaped_workloads(workload, degree, dim, classes):
    """The synthetic stand-ins for AdaQP's Reddit and ogbn-products have the shape they promise
    (generated here at 3,000 nodes: degree, dims and classes do not depend on the size)."""
    conf = option_config("dataset", workload)
    assert conf.name == "synthetic" and (conf.avg_degree, conf.feature_dim, conf.num_classes) == (degree, dim, classes)
    conf.num_nodes = 3000
    g = load_dataset(conf)
    assert g.x.shape == (3000, dim) and set(np.unique(g.y)) == set(range(classes))
    measured = g.edge_index.shape[1] / 3000  # both directions of every undirected edge
    assert 0.8 * degree <= measured <= 1.05 * degree, measured
    reddit, products = option_config("dataset", "reddit-like"), option_config("dataset", "products-like")
    assert reddit.avg_degree > 2 * products.avg_degree


def test_every_dataset_choice_names_a_loader_that_knows_it():
    """gnnq.config.registry.DATASETS (config imports no data) and the loader families in gnnq.data.registry agree:
    every name, and each name's line in docs/config.md."""
    from gnnq.data import registry as loaders

    families = [loaders.PYG, loaders.OGB, loaders.NPZ, loaders.FILES, loaders.SYNTHETIC]
    assert sorted(name for family in families for name in family.names) == sorted(DATASETS.names())
    for choice in DATASETS.choices():
        family = DATASETS.target(choice.name)
        assert choice.name in family.names and choice.about == family.about(choice.name), choice.name


# --- bring your own graph: what a spreadsheet or a typo leaves in the files (issue 31, items 1-4) ------------


def _files_graph_csv(d):
    """A 40-node graph written as text files: edges.csv with a header line, labels.csv, features.npy."""
    edges, x, y = write_files_graph(d)
    (d / "edges.txt").unlink()
    (d / "labels.npy").unlink()
    (d / "edges.csv").write_text("src,dst\n" + "".join(f"{a},{b}\n" for a, b in edges))
    (d / "labels.csv").write_text("".join(f"{v}\n" for v in y))
    return edges, x, y


def test_files_with_a_byte_order_mark_keep_every_edge_and_label(tmp_path, capfd):
    d = tmp_path / "g"
    edges, _, y = _files_graph_csv(d)
    plain = load_dataset(cfg("files", path=str(d), to_undirected=False))
    assert "dropped 1 header line" in capfd.readouterr().err
    bom = "\ufeff"
    (d / "edges.csv").write_text(bom + "".join(f"{a},{b}\n" for a, b in edges), encoding="utf-8")  # no header
    (d / "labels.csv").write_text(bom + "".join(f"{v}\n" for v in y), encoding="utf-8")
    g = load_dataset(cfg("files", path=str(d), to_undirected=False))
    assert "header" not in capfd.readouterr().err, "a BOM is not a header"
    assert np.array_equal(g.edge_index, plain.edge_index) and np.array_equal(g.y, y)
    assert g.edge_index.shape[1] == len(canonical_edges(edges.T, 40)[0])


def test_files_name_the_line_and_token_that_is_not_a_number(tmp_path):
    d = tmp_path / "g"
    write_files_graph(d)
    lines = [f"{i % 40} {(i * 7) % 40}\n" for i in range(100_000)]
    lines[50_000] = "3 x7\n"
    (d / "edges.txt").write_text("".join(lines))
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("files", path=str(d)))
    assert "edges.txt" in error_line(e) and "line 50001: 'x7'" in error_line(e)


def test_files_refuse_a_class_id_far_beyond_the_node_count_naming_file_and_id(tmp_path):
    d = tmp_path / "g"
    _, _, y = write_files_graph(d)
    y[5] = 1_000_000_000
    np.save(d / "labels.npy", y)
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("files", path=str(d)))
    assert "labels.npy" in error_line(e) and "class id 1000000000" in error_line(e) and "40 nodes" in error_line(e)


def test_files_report_huge_numbers_as_given(tmp_path):
    d = tmp_path / "g"
    _, x, _ = write_files_graph(d)
    (d / "edges.txt").write_text("0 1\n1 1e20\n")
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("files", path=str(d)))
    assert "1e20 (line 2)" in error_line(e) and "-9223372036854775808" not in error_line(e)
    assert "node ids must be 0..39" in error_line(e)
    (d / "edges.txt").write_text("0 1\n1 100000000000000000000\n")  # beyond int64: pandas reads an object column
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("files", path=str(d)))
    assert "node 100000000000000000000 (line 2)" in error_line(e) and "0..39" in error_line(e)
    (d / "edges.txt").write_text("0 1\n")
    big = x.astype(np.float64)
    big[3, 2] = 1e300
    np.save(d / "features.npy", big)
    with pytest.raises(DatasetError) as e:
        load_dataset(cfg("files", path=str(d)))
    assert "1e+300" in error_line(e) and "float32" in error_line(e) and "node 3, feature 2" in error_line(e)


@pytest.mark.parametrize("name", ["reddit", "yelp", "ogbn-products", "amazon-products"])
def test_adaqps_datasets_load_from_small_files_in_their_real_formats(name, tmp_path, monkeypatch):
    """tests/data_fixtures.py writes each in its loader's real on-disk format; the real loader reads it, and refuses
    another node count than the published one unless GNNQ_FIXTURE_DATA=1 (test-only)."""
    from tests.data_fixtures import SHAPES, write_adaqp_datasets

    write_adaqp_datasets(tmp_path)
    c = cfg(name, root=str(tmp_path), download=False)
    features, classes, multilabel = SHAPES[name]
    if name != "ogbn-products":  # PyG's loaders check the published node count (OGB's files carry their own)
        monkeypatch.delenv("GNNQ_FIXTURE_DATA", raising=False)
        with pytest.raises(DatasetError) as e:
            load_dataset(c)
        assert f"give 160 nodes, not {expected_num_nodes(c)}" in error_line(e)
    monkeypatch.setenv("GNNQ_FIXTURE_DATA", "1")
    g = load_dataset(c)
    assert (g.num_nodes, g.x.shape[1], g.num_classes, g.multilabel) == (160, features, classes, multilabel)
    assert g.train_mask.sum() == 96 and g.val_mask.sum() == 32 and g.test_mask.sum() == 32
    assert g.metric == ("micro_f1" if multilabel else "accuracy") and g.edge_index.shape[1] > 1000
