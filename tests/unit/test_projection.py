"""gnnq-bench project: traces replayed on a modelled cluster (docs/projection.md).

Hand-made traces (tests/projection_traces.py) whose answers are worked out in each test, and real traced runs of
the emulated cluster (tests/fixtures/projection/) whose measured epoch the projection must reproduce.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gnnq.bench.harness import main as bench_main
from gnnq.projection.cluster import Cluster, recorded_cluster
from gnnq.projection.engine import AnalyticEngine
from gnnq.projection.partstats import extrapolate, stats_from_assignment
from gnnq.projection.project import project_recorded, recorded_timelines
from gnnq.projection.scaling import fit_layer_model, scaled_timelines
from gnnq.projection.timeline import Compute, Post, Wait, rank_timeline
from gnnq.projection.trace import read_trace
from tests.projection_traces import allreduce, compute, post, wait, write_trace

GBIT = 1000.0  # link_mbit of a 1 Gbit/s link
B = 12_500_000  # bytes a 1 Gbit/s link moves in 0.1 s
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "projection"


def _pair(r: int, nbytes: int) -> list[int]:
    out = [0, 0]
    out[1 - r] = nbytes
    return out


def sync_epoch(r: int, e: int) -> list[dict]:
    """0.1 s compute, a 0.1 s exchange waited for at once, 0.05 s compute, a 0.01 s all-reduce: 0.26 s."""
    msg = f"{e}:0"
    return [
        compute(0, 0.1),
        post(0.1, 0.1, msg, _pair(r, B), _pair(r, B)),
        wait(0.1, 0.2, msg),
        compute(0.2, 0.25, layer=1),
        allreduce(0.25, 0.26, 1_250_000),  # ring of 2: 2(N-1)/N of 1.25 MB at 125 MB/s = 0.01 s
    ]


def stale_epoch(r: int, e: int, blocking: bool = False) -> list[dict]:
    """PipeGCN-like: compute 0.1 s, wait for the previous epoch's message, post this epoch's (0.1 s on the wire),
    compute 0.1 s, all-reduce 0.01 s. The message has a whole epoch to arrive: 0.21 s per epoch. ``blocking``: the
    same trace with each message waited for right after its post (the wrong dependency): 0.31 s."""
    msg = f"{e}:0"
    ev = [compute(0, 0.1)]
    if blocking:
        ev += [post(0.1, 0.1, msg, _pair(r, B), _pair(r, B)), wait(0.1, 0.1, msg)]
    else:
        if e:
            ev.append(wait(0.1, 0.1, f"{e - 1}:0"))
        ev.append(post(0.1, 0.1, msg, _pair(r, B), _pair(r, B)))
    ev += [compute(0.1, 0.2, layer=1), allreduce(0.2, 0.21, 1_250_000)]
    return ev


def _project(run_dir: Path, **changes) -> float:
    trace = read_trace(run_dir)
    rec = recorded_cluster(trace.meta)
    return project_recorded(trace, rec.with_(**changes), rec).epoch_s


def test_own_setting_reproduces_hand_made_trace(tmp_path):
    run = write_trace(tmp_path / "sync", [[sync_epoch(r, e) for e in range(3)] for r in range(2)], hosts=2)
    trace = read_trace(run)
    assert trace.measured_epoch_s() == pytest.approx(0.26)
    proj = project_recorded(trace, recorded_cluster(trace.meta), recorded_cluster(trace.meta))
    assert proj.epoch_s == pytest.approx(0.26, rel=1e-6)
    s = proj.summary()
    assert s["compute_s"] == pytest.approx(0.15) and s["halo_wait_s"] == pytest.approx(0.1)
    assert s["allreduce_s"] == pytest.approx(0.01)
    # 10x the bandwidth: the exchange takes 0.01 s, the all-reduce 0.001 s
    assert _project(run, link_gbit=10.0) == pytest.approx(0.15 + 0.01 + 0.001)
    # twice as fast a device: compute halves, the wire does not
    assert _project(run, compute_speed=2.0) == pytest.approx(0.075 + 0.1 + 0.01)


def test_stale_exchange_does_not_block_its_epoch_and_blocking_is_caught(tmp_path):
    stale = write_trace(tmp_path / "stale", [[stale_epoch(r, e) for e in range(4)] for r in range(2)], hosts=2)
    assert _project(stale) == pytest.approx(0.21, rel=1e-6)  # the trace's own measured epoch
    assert read_trace(stale).measured_epoch_s() == pytest.approx(0.21)
    # The same epochs replayed as a blocking exchange (a strategy whose dependencies are wrong) is 0.1 s slower:
    # the test tells the two apart, so a model that made stale waits blocking would fail above.
    blocking = write_trace(
        tmp_path / "blocking", [[stale_epoch(r, e, blocking=True) for e in range(4)] for r in range(2)], hosts=2
    )
    assert _project(blocking) == pytest.approx(0.31, rel=1e-6)
    # at a tenth of the bandwidth the link is the bottleneck and never idle: per epoch it carries the message
    # (12.5 MB) and the all-reduce's 1.25 MB, which share it while both are in flight: 13.75 MB / 12.5 MB/s = 1.1 s
    assert _project(stale, link_gbit=0.1) == pytest.approx(1.1, rel=1e-3)


def test_two_messages_on_one_uplink_take_twice_as_long():
    cluster = Cluster(hosts=3, ranks_per_host=1, link_gbit=1.0)

    def timelines(receivers: list[int]) -> list:
        send = [B if q in receivers else 0 for q in range(3)]
        ranks = [[compute(0, 0), post(0, 0, "0:0", send, [0, 0, 0]), wait(0, 0, "0:0")]]
        for q in (1, 2):
            recv = [B if q in receivers else 0, 0, 0]
            ranks.append([post(0, 0, "0:0", [0, 0, 0], recv), wait(0, 0, "0:0")])
        return [rank_timeline([{"epoch": 0, "epoch_s": 0.0, "events": ev}]) for ev in ranks]

    one = AnalyticEngine(cluster).run(timelines([1])).epoch_s
    two = AnalyticEngine(cluster).run(timelines([1, 2])).epoch_s
    assert one == pytest.approx(0.1) and two == pytest.approx(0.2)
    # half duplex: a host's sends and receives share one link, so an exchange both ways takes twice as long
    exchange = [[post(0, 0, "0:0", _pair(r, B), _pair(r, B)), wait(0, 0, "0:0")] for r in range(2)]
    pair = [rank_timeline([{"epoch": 0, "epoch_s": 0.0, "events": ev}]) for ev in exchange]
    full = AnalyticEngine(Cluster(hosts=2, ranks_per_host=1, link_gbit=1.0)).run(pair).epoch_s
    half = AnalyticEngine(Cluster(hosts=2, ranks_per_host=1, link_gbit=1.0, duplex="half")).run(pair).epoch_s
    assert full == pytest.approx(0.1) and half == pytest.approx(0.2)
    # ranks of one host talk over its intra-host bandwidth (100 Gbit/s by default), which both directions share:
    # 2 x 12.5 MB at 12.5 GB/s = 2 ms
    local = AnalyticEngine(Cluster(hosts=1, ranks_per_host=2, link_gbit=1.0)).run(pair).epoch_s
    assert local == pytest.approx(0.002)


def test_rendezvous_a_part_starts_when_both_ranks_posted(tmp_path):
    """Rank 1 posts 0.3 s after rank 0: the exchange (0.1 s) ends at 0.4 s on both."""
    ranks = []
    for r, start in ((0, 0.0), (1, 0.3)):
        ranks.append(
            [[compute(0, start), post(start, start, "0:0", _pair(r, B), _pair(r, B)), wait(start, 0.4, "0:0")]]
        )
    run = write_trace(tmp_path / "late", ranks, hosts=2)
    assert _project(run) == pytest.approx(0.4)


def overlapped_epoch(r: int, e: int, busy_compute: float = 0.3) -> list[dict]:
    """A message posted at once (0.1 s on a 1 Gbit/s link) under ``busy_compute`` s of compute, then waited for."""
    msg = f"{e}:0"
    return [
        post(0, 0, msg, _pair(r, B), _pair(r, B)),
        compute(0, busy_compute),
        wait(busy_compute, busy_compute, msg),
    ]


def _three(event: dict) -> dict:
    """A 2-rank event's per-peer byte lists for 3 ranks (nothing to or from rank 2)."""
    return {k: [*event[k], 0] for k in ("send_bytes", "recv_bytes") if k in event}


def test_compute_slows_while_the_hosts_messages_move():
    """comm_interference 1: the first 0.1 s (the message on the wire) computes at half speed, 0.05 s of the 0.3 s
    compute; the remaining 0.25 s runs at full speed: the epoch takes 0.35 s, not 0.3 s."""
    tls = [rank_timeline([{"epoch": 0, "epoch_s": 0.3, "events": overlapped_epoch(r, 0)}]) for r in range(2)]
    plain = Cluster(hosts=2, ranks_per_host=1, link_gbit=1.0)
    assert AnalyticEngine(plain).run(tls).epoch_s == pytest.approx(0.3)
    proj = AnalyticEngine(plain.with_(comm_interference=1.0)).run(tls)
    assert proj.epoch_s == pytest.approx(0.35)
    assert proj.summary()["compute_s"] == pytest.approx(0.35)
    (busy_share,) = [v for v in proj.busy[0].values() if v > 0]
    assert busy_share == pytest.approx(0.1 / 0.35)
    # ranks of one host: their messages move over the 100 Gbit/s between them, 2 ms busy, 1 ms of compute lost
    local = AnalyticEngine(Cluster(hosts=1, ranks_per_host=2, link_gbit=1.0, comm_interference=1.0)).run(tls)
    assert local.epoch_s == pytest.approx(0.3 + 0.001, rel=1e-6)
    # a host whose link moves nothing is not slowed: rank 2 only computes while hosts 0 and 1 exchange
    three = [
        rank_timeline([{"epoch": 0, "epoch_s": 0.3, "events": [{**e, **_three(e)} for e in overlapped_epoch(r, 0)]}])
        for r in range(2)
    ]
    three.append(rank_timeline([{"epoch": 0, "epoch_s": 0.3, "events": [compute(0, 0.3)]}]))
    proj3 = AnalyticEngine(plain.with_(hosts=3, comm_interference=1.0)).run(three)
    assert [e.epoch_s for e in proj3.rank_epochs[2]] == [pytest.approx(0.3)]
    assert proj3.epoch_s == pytest.approx(0.35)


def test_recorded_interference_is_taken_out_of_the_traced_compute(tmp_path):
    """A run traced on hosts with comm_interference 1 computed 0.35 s of which 0.3 s is the work (the test above).
    Cleaned, projected onto an idle-host cluster it takes 0.3 s; onto its own setting, the measured 0.35 s."""
    run = write_trace(tmp_path / "busy", [[overlapped_epoch(r, e, 0.35) for e in range(3)] for r in range(2)], hosts=2)
    trace = read_trace(run)
    rec = recorded_cluster(trace.meta, {"comm_interference": 1.0})
    assert rec.comm_interference == 1.0 and rec.link_gbit == 1.0
    cleaned = recorded_timelines(trace, rec)
    assert sum(op.seconds for op in cleaned[0] if isinstance(op, Compute)) == pytest.approx(3 * 0.3, rel=1e-3)
    assert project_recorded(trace, rec, rec).epoch_s == pytest.approx(0.35, rel=1e-3)
    idle = rec.with_(comm_interference=0.0, link_gbit=10.0)
    assert project_recorded(trace, idle, rec).epoch_s == pytest.approx(0.30, rel=1e-3)
    # not cleaned (no recorded interference): the slowed compute is carried over
    assert project_recorded(trace, idle, recorded_cluster(trace.meta)).epoch_s == pytest.approx(0.35)


def test_allreduce_overhead_is_calibrated_on_the_recorded_cluster(tmp_path):
    """A 0.03 s all-reduce of bytes a ring moves in 0.01 s: 0.02 s of it is overhead, kept at any bandwidth."""
    ranks = [[[compute(0, 0.1), allreduce(0.1, 0.13, 1_250_000)]] for _ in range(2)]
    run = write_trace(tmp_path / "ar", ranks, hosts=2)
    assert _project(run) == pytest.approx(0.13)
    assert _project(run, link_gbit=10.0) == pytest.approx(0.1 + 0.001 + 0.02)


@pytest.mark.parametrize(
    ("name", "tolerance"),
    [
        ("adaqp_vanilla-hosts2-100mbit", 0.05),
        ("adaqp-hosts2-100mbit", 0.10),
        ("pipegcn-hosts2-100mbit", 0.10),
        ("bnsgcn-hosts2-100mbit", 0.10),
    ],
)
def test_real_traced_run_reproduces_its_own_epoch_time(name, tolerance):
    """Real 2-host runs of the emulated cluster (one pinned core each, 100 Mbit/s; tests/fixtures/projection/README.md):
    projected on their own setting with the emulator's link model (half duplex, 0.96 goodput: docs/projection.md),
    the epoch time is within the stated tolerance of the run's record."""
    run = FIXTURES / name
    trace = read_trace(run)
    rec = recorded_cluster(trace.meta)
    got = project_recorded(trace, rec.with_(duplex="half", goodput=0.96), rec).epoch_s
    measured = trace.record["epoch_time_s"]
    assert abs(got - measured) / measured <= tolerance, (got, measured)


def test_real_stale_trace_replayed_as_blocking_misses_its_measured_epoch():
    """PipeGCN's real trace (100 Mbit/s: each stale message is 1.7 s on the emulated link) with every wait moved right
    after its post — the dependencies of a blocking exchange — is projected far from the measured epoch time, while
    the trace as recorded lands within 10%: the test tells a wrong dependency model from the right one."""
    trace = read_trace(FIXTURES / "pipegcn-hosts2-100mbit")
    rec = recorded_cluster(trace.meta)
    emulator = rec.with_(duplex="half", goodput=0.96)
    right = recorded_timelines(trace, rec)
    wrong = []
    for ops in right:
        blocking = []
        for op in ops:
            if isinstance(op, Wait):
                continue
            blocking.append(op)
            if isinstance(op, Post):
                blocking.append(Wait(op.msg))
        wrong.append(blocking)
    measured = trace.record["epoch_time_s"]
    good = AnalyticEngine(emulator, trace.meta["rank_host"]).run(right).epoch_s
    bad = AnalyticEngine(emulator, trace.meta["rank_host"]).run(wrong).epoch_s
    assert abs(good - measured) / measured <= 0.10
    assert (bad - measured) / measured > 0.5, (bad, measured)


def test_scaled_bytes_follow_the_new_halo_rows_and_the_recorded_bytes_per_row(tmp_path):
    parts = [
        {
            "rank": r,
            "inner_nodes": 1000,
            "local_edges": 10000,
            "halo_rows_from": _pair(r, 100),
            "rows_to": _pair(r, 100),
        }
        for r in range(2)
    ]
    run = write_trace(tmp_path / "s", [[sync_epoch(r, 0)] for r in range(2)], hosts=2, parts=parts)
    trace = read_trace(run)
    tls = recorded_timelines(trace, recorded_cluster(trace.meta))
    new = [
        {
            "rank": r,
            "inner_nodes": 500,
            "local_edges": 5000,
            "halo_rows_from": [0 if q == r else 10 * (q + 1) for q in range(4)],
            "rows_to": [0 if q == r else 10 * (r + 1) for q in range(4)],
        }
        for r in range(4)
    ]
    model = fit_layer_model(tls, 1, parts, [64, 32, 8])
    scaled = scaled_timelines(tls, parts, new, [64, 32, 8], model)
    posts = [[op for op in tl if isinstance(op, Post)][0] for tl in scaled]
    per_row = B / 100  # the recorded message: B bytes for 100 rows
    assert posts[2].send_bytes == tuple(int(per_row * 30) if q != 2 else 0 for q in range(4))
    assert posts[2].recv_bytes == tuple(int(per_row * 10 * (q + 1)) if q != 2 else 0 for q in range(4))
    # compute of half the nodes and edges: half the time (same widths, both terms halve)
    old_c = sum(op.seconds for op in tls[0] if type(op).__name__ == "Compute" and op.kind == "layer")
    new_c = sum(op.seconds for op in scaled[0] if type(op).__name__ == "Compute" and op.kind == "layer")
    assert new_c == pytest.approx(old_c / 2)


def test_part_stats_equal_the_parts_gnnq_builds():
    from gnnq.data.loaders.synthetic import generate_sbm
    from gnnq.data.part import build_parts
    from gnnq.data.partition import partition_nodes

    g = generate_sbm(1500, 8.0, 4, 4, 0.5, 1.0, seed=0)
    assignment = partition_nodes(g.edge_index, g.num_nodes, 3, "metis", 0)
    stats = stats_from_assignment(g.edge_index, assignment, 3)
    for part, st in zip(build_parts(g, assignment, 3), stats):
        assert st["inner_nodes"] == part.num_inner
        assert st["local_edges"] == int(part.indptr[-1])
        assert st["halo_rows_from"] == part.halo_counts.tolist()
        assert st["rows_to"] == part.send_counts.tolist()
    # the extrapolation rule reproduces the partition it was fitted on, and halo rows per peer shrink with more parts
    known = {3: {"parts": stats, "num_nodes": g.num_nodes, "num_edges": g.edge_index.shape[1]}}
    same = extrapolate(known, 3, g.num_nodes, g.edge_index.shape[1])
    assert sum(same["parts"][0]["halo_rows_from"]) == pytest.approx(
        np.mean([sum(s["halo_rows_from"]) for s in stats]), rel=0.02
    )
    far = extrapolate(known, 30, g.num_nodes * 10, g.edge_index.shape[1] * 10)
    assert far["parts"][0]["halo_rows_from"][1] < same["parts"][0]["halo_rows_from"][1]


def test_simgrid_replays_the_hand_made_trace_like_the_model(tmp_path):
    from gnnq.errors import ConfigError
    from gnnq.projection.simgrid_engine import SimGridEngine, simgrid_module

    try:
        simgrid_module()
    except ConfigError as exc:
        pytest.skip(str(exc))
    run = write_trace(tmp_path / "sync", [[sync_epoch(r, e) for e in range(2)] for r in range(2)], hosts=2)
    trace = read_trace(run)
    rec = recorded_cluster(trace.meta)
    got = SimGridEngine(rec, model="CM02").run(recorded_timelines(trace, rec)).epoch_s
    assert got == pytest.approx(0.26, rel=0.05)  # CM02: max-min sharing, as the analytical model


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    rc = bench_main(["project", *argv])
    return rc, capsys.readouterr().err.strip()


def test_bad_input_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "norun").mkdir()
    rc, err = _cli([str(tmp_path / "norun")], capsys)
    assert rc == 2 and "no trace/" in err and str(tmp_path / "norun") in err and len(err.splitlines()) == 1
    run = write_trace(tmp_path / "ok", [[sync_epoch(r, 0)] for r in range(2)], hosts=2)
    rc, err = _cli([str(run), "--hosts", "two"], capsys)
    assert rc == 2 and "--hosts 'two'" in err
    rc, err = _cli([str(run), "--duplex", "quarter"], capsys)
    assert rc == 2 and "duplex='quarter'" in err and "full, half" in err
    rc, err = _cli([str(run), "--link-gbit", "0"], capsys)
    assert rc == 2 and "link_gbit=0.0" in err and "> 0" in err
    rc, err = _cli([str(run), "--interference", "-1"], capsys)
    assert rc == 2 and "comm_interference=-1.0" in err and ">= 0" in err
    rc, err = _cli([str(run), "--cluster", "emulatd"], capsys)
    assert rc == 2 and "--cluster emulatd" in err and "built-in model: emulated" in err
    rc, err = _cli([str(run), "--recorded-cluster", "emulatd"], capsys)
    assert rc == 2 and err.startswith("gnnq-bench project: --recorded-cluster emulatd: cannot read it")
    loopback = write_trace(tmp_path / "loopback", [[sync_epoch(r, 0)] for r in range(2)], hosts=2, link_mbit=None)
    rc, err = _cli([str(loopback), "--link-gbit", "1", "--recorded-cluster", "emulated"], capsys)
    errors = [line for line in err.splitlines() if ": warning: " not in line]  # (a hand-made trace has no record)
    assert rc == 2 and str(loopback) in err and "traced on no shaped link" in err and len(errors) == 1
    rc, err = _cli([str(run), "--cluster", "emulated", "--engine", "simgrid"], capsys)
    assert rc == 2 and "analytic engine only" in err
    with pytest.raises(SystemExit) as exc:
        bench_main(["project", str(run), "--engine", "ns3"])
    assert exc.value.code == 2 and "--engine 'ns3'" in capsys.readouterr().err
    broken = tmp_path / "broken"
    shutil.copytree(run, broken)
    (broken / "trace" / "rank1.jsonl").unlink()
    rc, err = _cli([str(broken)], capsys)
    assert rc == 2 and "rank1.jsonl: missing" in err
    meta = json.loads((broken / "trace" / "meta.json").read_text())
    (broken / "trace" / "meta.json").write_text(json.dumps({**meta, "version": 7}))
    rc, err = _cli([str(broken)], capsys)
    assert rc == 2 and "version 7" in err and "reads version 1" in err
    rc, err = _cli([str(run), "--hosts", "4"], capsys)  # another host count needs the run's config.yaml
    assert rc == 2 and "no config.yaml" in err


def test_command_writes_table_files_and_heatmap(tmp_path, capsys):
    runs = []
    for name, make in (("adaqp_vanilla", sync_epoch), ("pipegcn", stale_epoch)):
        runs.append(
            write_trace(tmp_path / name, [[make(r, e) for e in range(3)] for r in range(2)], hosts=2, experiment=name)
        )
    out = tmp_path / "out"
    rc = bench_main(
        [
            "project",
            *map(str, runs),
            "--hosts",
            "1,2",
            "--ranks-per-host",
            "1",
            "--link-gbit",
            "1,10",
            "--graph",
            "same",
            "--out",
            str(out),
        ]
    )
    assert rc == 2  # 1 host x 1 rank is another rank count: it needs config.yaml, which these traces lack
    rc = bench_main(["project", *map(str, runs), "--link-gbit", "1,10", "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "pipegcn" in printed and "1.24x" in printed  # 0.26 / 0.21 at 1 Gbit/s
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert {(r["method"], r["link_gbit"]) for r in rows} == {
        (m, b) for m in ("adaqp_vanilla", "pipegcn") for b in (1, 10)
    }
    assert (out / "results.csv").read_text().startswith("run,method,hosts")
    assert "projected" in (out / "README.md").read_text()
