"""The trace recorder (gnnq.comm.trace) and its files, in one process: codec work folded into its message,
compute filling the gaps, nothing recorded outside a traced epoch, the key's validation.

Here: the cases without processes; the ones with gloo ranks are in `tests/integration/test_trace.py`.
"""

from __future__ import annotations

import json

import pytest
import torch

from gnnq.comm import CommStats, Communicator
from gnnq.comm.accounting import GRAD_SYNC, HALO_TRAIN
from gnnq.comm.communicator import timed
from gnnq.comm.trace import DECODE, ENCODE, TraceRecorder, with_compute
from gnnq.config.compose import compose_config
from gnnq.errors import ConfigError
from gnnq.track.trace_files import EpochLines, read_trace, write_meta

KEY = (HALO_TRAIN, 1, "fwd")


def _recorder():
    lines = []
    return TraceRecorder(0, 1, lines.append), lines


def test_encode_and_decode_go_with_their_message():
    rec, lines = _recorder()
    rec.begin_epoch(3, 100.0)
    rec.codec(KEY, ENCODE, 100.1, 100.2)
    msg = rec.post(KEY, 100.2, 100.25, [0, 8], [0, 4])
    rec.wait(KEY, msg, 100.5, 100.6)
    rec.codec(KEY, DECODE, 100.6, 100.65)
    rec.collective(GRAD_SYNC, 100.7, 100.8, 64)
    line = rec.end_epoch(1.0)
    assert lines == [line] and msg == "3:0"
    post, wait = (e for e in line["events"] if e["op"] in ("post", "wait"))
    assert post["t0"] == pytest.approx(0.1) and post["encode_s"] == pytest.approx(0.1), "posting began with encoding"
    assert wait["msg"] == "3:0" and wait["t1"] == pytest.approx(0.65) and wait["decode_s"] == pytest.approx(0.05)
    assert "key" not in post and "key" not in wait


def test_the_gaps_are_compute_labelled_by_the_next_event():
    events = [
        {"op": "post", "t0": 0.2, "t1": 0.3, "layer": 1, "direction": "fwd", "category": HALO_TRAIN},
        {"op": "wait", "t0": 0.5, "t1": 0.6, "layer": 1, "direction": "fwd", "category": HALO_TRAIN},
        {"op": "allreduce", "t0": 0.7, "t1": 0.8, "bytes": 4, "category": GRAD_SYNC},
    ]
    out = with_compute(events, 1.0)
    compute = [(e["t0"], e["t1"], e["layer"], e["direction"], e["what"]) for e in out if e["op"] == "compute"]
    assert compute == [
        (0.0, 0.2, 1, "fwd", "layer"),
        (0.3, 0.5, 1, "fwd", "layer"),
        (0.6, 0.7, None, None, "other"),
        (0.8, 1.0, None, None, "optimizer"),
    ]
    assert [e["t0"] for e in out] == sorted(e["t0"] for e in out)


def test_the_communicator_records_only_inside_a_traced_epoch():
    stats = CommStats()
    comm = Communicator(stats)
    rows = torch.ones(4, 2)
    comm.all_to_all_start(rows, [4], [4], category=HALO_TRAIN, layer=1, direction="fwd").wait()  # no recorder
    rec, lines = _recorder()
    stats.trace = rec
    comm.all_to_all_start(rows, [4], [4], category=HALO_TRAIN, layer=1, direction="fwd").wait()  # between epochs
    with timed(stats, "codec", KEY, rows, ENCODE):
        pass
    assert rec.events == []
    rec.begin_epoch(1, rec.now())
    pending = comm.all_to_all_start(rows, [4], [4], category=HALO_TRAIN, layer=1, direction="fwd")
    pending.wait()
    line = rec.end_epoch(rec.now() - rec.origin)
    ops = [e["op"] for e in line["events"] if e["op"] != "compute"]
    assert ops == ["post", "wait"] and pending.msg == "1:0"
    post = next(e for e in line["events"] if e["op"] == "post")
    assert post["send_bytes"] == [0] and post["recv_bytes"] == [0], "a rank's rows to itself are not on the wire"


def test_the_files_round_trip(tmp_path):
    write_meta(tmp_path, {"world_size": 1, "hosts": 1})
    lines = EpochLines(tmp_path, 0)
    lines({"epoch": 1, "rank": 0, "epoch_s": 0.5, "events": []})
    lines.close()
    meta, ranks = read_trace(tmp_path)
    assert meta["version"] == 1 and meta["clock"].startswith("perf_counter")
    assert ranks == {0: [{"epoch": 1, "rank": 0, "epoch_s": 0.5, "events": []}]}
    for epoch in (2, 3):  # an attempt that got to epoch 3, and then failed
        EpochLines(tmp_path, 0, resume=True)({"epoch": epoch, "rank": 0, "epoch_s": 0.5, "events": []})
    resumed = EpochLines(tmp_path, 0, resume=True)  # from a checkpoint after epoch 1: epochs 2 and 3 again
    for epoch in (2, 3):
        resumed({"epoch": epoch, "rank": 0, "epoch_s": 0.7, "events": []})
    resumed.close()
    lines = [json.loads(s) for s in (tmp_path / "trace" / "rank0.jsonl").read_text().splitlines()]
    assert [(line["epoch"], line["epoch_s"]) for line in lines] == [(1, 0.5), (2, 0.7), (3, 0.7)]


def test_the_key_is_off_by_default_and_refused_where_nothing_is_exchanged():
    assert compose_config([]).trainer.trace is False
    assert compose_config(["trainer.trace=true", "parallel=stale"]).trainer.trace is True
    assert compose_config(["trainer.trace=true", "experiment=plexus"]).trainer.trace is True  # the grid's collectives
    with pytest.raises(
        ConfigError, match=r"trainer\.trace=true is not supported with parallel=admm.*trainer\.trace=false"
    ):
        compose_config(["trainer.trace=true", "experiment=pdadmm_g"])
