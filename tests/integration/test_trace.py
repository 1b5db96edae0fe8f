"""trainer.trace=true on real gloo groups: every full-graph strategy that moves halo rows writes
trace/meta.json and trace/rank<r>.jsonl (docs/runs.md#traces) whose bytes are the accounting's.

Here: the cases with real processes (gloo ranks); the others are in `tests/unit/test_trace.py`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from gnnq.comm import Communicator
from gnnq.comm.accounting import GRAD_SYNC, HALO_TRAIN
from gnnq.config.typed import typed_config
from gnnq.data.part import build_parts
from gnnq.data.partition import partition_nodes
from gnnq.track.trace_files import TRACE_DIR, read_trace
from gnnq.train.full_graph import train
from tests.helpers import random_graph, run_distributed

EPOCHS, HIDDEN, LAYERS = 3, 16, 3
POINTS = {  # name: overrides (the methods of issue 33's validation, and SANCUS)
    "vanilla": {"parallel.name": "sync"},
    "adaqp_q": {"parallel.name": "sync", "quantizer.name": "uniform"},
    "adaqp": {"parallel.name": "overlap", "quantizer.name": "uniform"},
    "pipegcn": {"parallel.name": "stale"},
    "bnsgcn": {"parallel.name": "sampling", "parallel.sampling_rate": 0.5},
    "sancus": {"parallel.name": "sancus"},
    "adaqp_powersgd": {"parallel.name": "overlap", "quantizer.name": "uniform", "trainer.grad_sync.mode": "powersgd"},
    "vanilla_grad_codec": {"parallel.name": "sync", "trainer.grad_sync.mode": "codec"},
    "untraced": {"parallel.name": "sync", "trainer.trace": False},
}


def _cfg(overrides: dict):
    names = {key.split(".")[0]: {"name": value} for key, value in overrides.items() if key.endswith(".name")}
    cfg = typed_config(names)
    cfg.model.hidden, cfg.model.layers, cfg.model.dropout = HIDDEN, LAYERS, 0.5
    cfg.trainer.epochs, cfg.trainer.eval_every, cfg.trainer.trace = EPOCHS, EPOCHS, True
    cfg.dataset.name = "random"
    for key, value in overrides.items():
        OmegaConf.update(cfg, key, value)
    return cfg


def _runs(root: str) -> dict:
    """Every point trained on this rank's part, each into its own run dir under ``root``; rank 0's rows."""
    comm = Communicator()
    graph = random_graph(num_nodes=200, num_edges=1400, seed=3)
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, comm.world_size, "metis", seed=1)
    part = build_parts(graph, assignment, comm.world_size)[comm.rank]
    out = {}
    for name, overrides in POINTS.items():
        rows: list[dict] = []
        comm.stats.reset()
        train(_cfg(overrides), part, comm, rows.append, run_dir=Path(root) / name)
        out[name] = rows
    return out


@pytest.fixture(scope="module")
def traced():
    """{point: (run dir, rows)}: every point run on 2 ranks, traced but one."""
    with tempfile.TemporaryDirectory() as root:
        rows = run_distributed(2, _runs, root)[0]
        yield {name: (Path(root) / name, rows[name]) for name in POINTS}


TRACED = [name for name in POINTS if name != "untraced"]


@pytest.mark.parametrize("name", TRACED)
def test_the_files_parse_with_the_schema(traced, name):
    run_dir, rows = traced[name]
    meta, ranks = read_trace(run_dir)
    assert meta["version"] == 1 and meta["world_size"] == 2 and meta["rank_host"] == [0, 0]
    assert meta["method"]["parallel"] == POINTS[name]["parallel.name"]
    assert meta["method"]["overlap"] == (name in ("adaqp", "adaqp_powersgd")) and meta["method"]["stale"] == (
        name == "pipegcn"
    )
    assert set(meta["cluster"]) >= {"name", "link_mbit", "latency_ms", "cores_per_host", "pinned"}
    assert meta["model"]["widths"][1:-1] == [HIDDEN] * (LAYERS - 1)
    parts = meta["graph"]["parts"]
    assert [p["rank"] for p in parts] == [0, 1]
    assert parts[0]["rows_to"][1] == parts[1]["halo_rows_from"][0] > 0, "what 0 sends 1 is what 1 receives from 0"
    assert meta["graph"]["num_edges"] == sum(p["local_edges"] for p in parts)
    for r, lines in ranks.items():
        assert [line["epoch"] for line in lines] == list(range(1, EPOCHS + 1))
        for line in lines:
            assert line["rank"] == r and line["epoch_s"] > 0
            for e in line["events"]:
                assert e["op"] in ("compute", "post", "wait", "allreduce")
                if e["op"] == "post":
                    assert len(e["send_bytes"]) == len(e["recv_bytes"]) == 2 and e["encode_s"] >= 0
                    assert e["send_bytes"][r] == e["recv_bytes"][r] == 0, "nothing on the wire to itself"
                if e["op"] == "compute":
                    assert e["direction"] in ("fwd", "bwd", None) and e["what"]


@pytest.mark.parametrize("name", TRACED)
def test_event_times_are_monotone_inside_the_epoch(traced, name):
    _, ranks = read_trace(traced[name][0])
    for lines in ranks.values():
        for line in lines:
            cursor = 0.0
            for e in line["events"]:
                t0, t1 = e.get("t0", e.get("t")), e.get("t1", e.get("t"))
                assert cursor - 1e-9 <= t0 <= t1 <= line["epoch_s"] + 1e-9, (e, line["epoch_s"])
                cursor = t1
            assert line["events"][-1]["t1"] == pytest.approx(line["epoch_s"]), "compute fills the epoch to its end"


@pytest.mark.parametrize("name", TRACED)
def test_per_peer_bytes_are_the_accountings(traced, name):
    run_dir, rows = traced[name]
    meta, ranks = read_trace(run_dir)
    for i, row in enumerate(rows):
        posts = {r: [e for e in ranks[r][i]["events"] if e["op"] == "post"] for r in ranks}
        halo = [e for r in ranks for e in posts[r] if e["category"] == HALO_TRAIN]
        assert sum(sum(e["send_bytes"]) for e in halo) == row["comm_bytes"], f"epoch {row['epoch']}"
        collectives = [e for r in ranks for e in ranks[r][i]["events"] if e["op"] == "allreduce"]
        grads = [e for e in collectives if e["category"] == GRAD_SYNC]
        grad_posts = [e for r in ranks for e in posts[r] if e["category"] == GRAD_SYNC]  # trainer.grad_sync=codec
        assert bool(grad_posts) == (name == "vanilla_grad_codec")
        assert sum(e["bytes"] for e in grads) + sum(sum(e["send_bytes"]) for e in grad_posts) == row["grad_sync_bytes"]
        a, b = ([e for e in posts[r] if e["category"] == HALO_TRAIN] for r in (0, 1))
        assert [e["send_bytes"][1] for e in a] == [e["recv_bytes"][0] for e in b], "each message's two ends agree"
        if name == "vanilla":  # fp32 rows: rows to each peer x hidden x 4 bytes, per hidden layer and direction
            rows_to = [p["rows_to"] for p in meta["graph"]["parts"]]
            analytic = 2 * (LAYERS - 1) * sum(map(sum, rows_to)) * HIDDEN * 4
            assert row["comm_bytes"] == analytic


def test_a_quantized_message_carries_its_codec_time(traced):
    _, ranks = read_trace(traced["adaqp_q"][0])
    events = [e for line in ranks[0] for e in line["events"]]
    assert all(e["encode_s"] > 0 for e in events if e["op"] == "post" and e["category"] == HALO_TRAIN)
    assert all(e["decode_s"] > 0 for e in events if e["op"] == "wait" and e["category"] == HALO_TRAIN)


def test_a_stale_wait_names_a_message_posted_an_epoch_earlier(traced):
    _, ranks = read_trace(traced["pipegcn"][0])
    for lines in ranks.values():
        posted = {e["msg"]: line["epoch"] for line in lines for e in line["events"] if e["op"] == "post"}
        assert len(posted) == sum(1 for line in lines for e in line["events"] if e["op"] == "post"), "unique ids"
        earlier = [
            (posted[e["msg"]], line["epoch"])
            for line in lines
            for e in line["events"]
            if e["op"] == "wait" and posted.get(e["msg"], line["epoch"]) < line["epoch"]
        ]
        assert (EPOCHS - 1, EPOCHS) in earlier, "the last epoch waits for the rows its predecessor posted"


def test_a_sync_wait_names_its_own_epochs_post(traced):
    _, ranks = read_trace(traced["vanilla"][0])
    for line in ranks[0]:
        posts = [e["msg"] for e in line["events"] if e["op"] == "post"]
        waits = [e["msg"] for e in line["events"] if e["op"] == "wait"]
        assert waits == posts and all(m.startswith(f"{line['epoch']}:") for m in posts)


def test_tracing_off_writes_nothing(traced):
    run_dir, rows = traced["untraced"]
    assert len(rows) == EPOCHS and not (run_dir / TRACE_DIR).exists()
