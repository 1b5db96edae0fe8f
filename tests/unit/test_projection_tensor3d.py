"""parallel=tensor3d in gnnq-bench project: collectives on sub-groups in the engine, Plexus's model's epoch time,
and the crossover between the two families (docs/projection.md, "parallel=tensor3d")."""

from __future__ import annotations

import pytest

from gnnq.parallel.tensor3d_grid import Grid, plexus_comm_volume
from gnnq.projection.cluster import Cluster
from gnnq.projection.engine import AnalyticEngine
from gnnq.projection.outputs import crossover, crossover_lines
from gnnq.projection.tensor3d import plexus_model_epoch_s
from gnnq.projection.timeline import AllReduce, Compute, EpochStart

MB = 1_000_000


def _run(timelines, hosts=4, gbit=1.0, latency_ms=0.0):
    cluster = Cluster(hosts=hosts, ranks_per_host=len(timelines) // hosts, link_gbit=gbit, latency_ms=latency_ms)
    return AnalyticEngine(cluster).run(timelines)


def test_disjoint_groups_run_at_once_and_one_group_waits_for_its_members():
    # lines (0,1) and (2,3): each member sends 1 MB to its ring successor; 1 Gbit/s = 125 MB/s: 8 ms, both at once
    tl = [[EpochStart(0), AllReduce(MB, group=(0, 1) if r < 2 else (2, 3))] for r in range(4)]
    assert _run(tl).epoch_s == pytest.approx(MB / 125e6, rel=1e-3)
    # rank 1 computes 50 ms first: its line waits for it, the other line does not
    tl = [
        [EpochStart(0)] + ([Compute(0.05)] if r == 1 else []) + [AllReduce(MB, group=(0, 1) if r < 2 else (2, 3))]
        for r in range(4)
    ]
    proj = _run(tl)
    ends = [proj.rank_epochs[r][0].epoch_s for r in range(4)]
    assert ends[0] == pytest.approx(0.05 + 0.008, rel=1e-3) and ends[2] == pytest.approx(0.008, rel=1e-3)


def test_group_collective_latencies_by_kind():
    # no bytes, 1 ms latency: an all-reduce of 3 ranks takes 2(g-1) = 4 latencies, an all-gather g-1 = 2
    for kind, steps in (("all_reduce", 4), ("all_gather", 2), ("reduce_scatter", 2)):
        tl = [[EpochStart(0), AllReduce(1, group=(0, 1, 2), kind=kind)] for _ in range(3)]
        assert _run(tl, hosts=3, gbit=1e6, latency_ms=1.0).epoch_s == pytest.approx(steps * 1e-3, rel=1e-3)


def test_plexus_comm_volume_by_hand():
    # grid 2x1x1, 4 nodes, widths [2, 2]: layer 0 has O = x = 2, I = D = 1. Plexus's comm_model counts the
    # aggregate's all-reduce over O, 2 (2-1)/2 * N * D / (I * D) = 8 elements, forward and again backward; every
    # other term has a factor (g-1) of a line of one rank: 16 elements, 64 bytes per rank
    assert plexus_comm_volume(Grid(2, 1, 1), 4, [2, 2]) == pytest.approx(64.0)


def test_plexus_model_epoch_time_is_bytes_over_the_link_plus_calibrated_compute():
    facts = {"grid": [2, 1, 1], "nodes": 4, "nnz": 8, "dims": [2, 2]}
    used = {"_plexus": (Grid(2, 1, 1), 4, 8, [2, 2], 0.5, facts)}  # the traced layers took 0.5 s at this very grid
    got = plexus_model_epoch_s(used, Cluster(hosts=2, ranks_per_host=1, link_gbit=1.0))
    assert got["plexus_model_comm_s"] == pytest.approx(64 / 125e6)
    assert got["plexus_model_comp_s"] == pytest.approx(0.5)
    assert got["plexus_model_epoch_s"] == pytest.approx(0.5 + 64 / 125e6)


def _row(method, family, hosts, gbit, epoch_s):
    return {"method": method, "family": family, "hosts": hosts, "link_gbit": gbit, "projected_epoch_s": epoch_s}


def test_crossover_on_a_synthetic_table():
    rows = []
    for hosts, grid_s, part_s in ((4, 3.0, 1.0), (8, 2.0, 1.5), (16, 1.0, 1.2), (32, 0.5, 1.1)):
        rows += [_row("plexus", "grid", hosts, 1, grid_s), _row("plexus_q", "grid", hosts, 1, grid_s * 1.1)]
        rows += [_row("adaqp", "partition", hosts, 1, part_s), _row("bnsgcn", "partition", hosts, 1, part_s * 2)]
        rows += [_row("plexus", "grid", hosts, 10, 5.0), _row("adaqp", "partition", hosts, 10, 1.0)]
    found = {c["link_gbit"]: c for c in crossover(rows)}
    assert found[1]["grid_wins_from"] == 16 and found[1]["grid_wins_at"] == [16, 32]
    assert found[10]["grid_wins_from"] is None
    lines = crossover_lines(crossover(rows))
    assert "first beats the best partition method at 16 hosts (faster at 16, 32 of 4, 8, 16, 32)" in lines[0] and lines[
        0
    ].endswith("(projected)")
    assert "none up to 32 hosts" in lines[1]


def test_group_overhead_is_the_fastest_members_duration_median_over_epochs_and_collectives():
    from pathlib import Path

    from gnnq.projection.tensor3d import group_overhead
    from gnnq.projection.trace import Trace

    def ev(t0, t1, group=(0, 1)):
        return {"op": "allreduce", "t0": t0, "t1": t1, "bytes": 8, "group": list(group), "layer": 0, "direction": "fwd"}

    # epoch 0: collective 0 took 10 ms on rank 0 (it arrived last), 30 ms on rank 1; collective 1: 5 and 20 ms
    # epoch 1: 12/40 ms and 7/9 ms; a world all-reduce (no group) is not a grid collective
    epochs = [
        [
            {
                "epoch_s": 1,
                "events": [ev(0, 0.010), ev(0.1, 0.105), {"op": "allreduce", "t0": 0.2, "t1": 0.9, "bytes": 8}],
            },
            {"epoch_s": 1, "events": [ev(0, 0.012), ev(0.1, 0.107)]},
        ],
        [
            {"epoch_s": 1, "events": [ev(0, 0.030), ev(0.1, 0.120)]},
            {"epoch_s": 1, "events": [ev(0, 0.040), ev(0.1, 0.109)]},
        ],
    ]
    trace = Trace(Path("."), {"world_size": 2}, epochs)
    # per collective, median over epochs of the fastest: 11 ms and 6 ms; their median: 8.5 ms
    assert group_overhead(trace) == pytest.approx(0.0085)


def test_simgrid_engine_refuses_sub_group_collectives():
    from gnnq.errors import ConfigError
    from gnnq.projection.simgrid_engine import SimGridEngine

    tl = [[EpochStart(0), AllReduce(MB, group=(0, 1))] for _ in range(2)]
    cluster = Cluster(hosts=2, ranks_per_host=1, link_gbit=1.0)
    with pytest.raises(ConfigError, match="analytic engine only"):
        SimGridEngine(cluster, None, "LV08").run(tl)
