"""The bench table's bound columns read "n/a" for points whose messages are not halo rows (registry ``messages``)."""

from __future__ import annotations

from gnnq.bench.bench_report import NOT_HALO, table_rows
from gnnq.bench.compare import halo_messages
from gnnq.config.registry import PARALLEL


def _row(applies: bool) -> dict:
    keys = ["epoch_time_s", "epoch_time_min_s", "epoch_time_max_s", "comm_share", "comm_bytes_per_epoch"]
    keys += ["bytes_vs_baseline", "target_val", "time_to_target_s", "test_mean", "test_std", "test_vs_baseline"]
    keys += ["speedup", "speedup_min", "speedup_max", "overhead_time_s", "wall_speedup", "time_to_target_speedup"]
    keys += ["codec_time_s", "cores_per_host"]
    row = dict.fromkeys(keys, 1.0)
    row |= {"label": "m", "method": "m", "setting": {}, "runs": 1, "failed": [], "target_reached": "1/1"}
    row |= {"oversubscribed": False, "baseline": "m"}
    row |= {"bound_no_overlap": 2.0, "bound_overlap": 3.0, "bound_fraction": 0.5, "bound_applies": applies}
    return row


def test_halo_messages_reads_the_registry():
    grid = [n for n in PARALLEL.names() if PARALLEL.choice(n).messages == "grid"]
    halo = [n for n in PARALLEL.names() if PARALLEL.choice(n).messages == "halo"]
    assert grid and halo
    assert not halo_messages({"config": {"parallel": {"name": grid[0]}}})
    assert halo_messages({"config": {"parallel": {"name": halo[0]}}})


def test_bound_columns_are_na_where_no_bound_applies():
    headers, rows = table_rows([_row(True), _row(False)])
    bound, of_bound = headers.index("bound (no overlap / perfect)"), headers.index("of bound")
    assert rows[0][bound] == "2.00x / 3.00x" and rows[0][of_bound] == "50%"
    assert rows[1][bound] == NOT_HALO and rows[1][of_bound] == NOT_HALO


def _record(parallel: str, epoch_s: float, nbytes: int) -> dict:
    return {
        "status": "ok",
        "config": {"parallel": {"name": parallel}},
        "epoch_time_s": epoch_s,
        "comm_time_s": epoch_s / 2,
        "comm_bytes_per_epoch": nbytes,
        "test": 0.8,
        "summary": {},
    }


def test_no_bound_for_a_halo_method_against_a_reference_whose_messages_are_not_halo_rows():
    """The bounds use the reference's halo time: a grid reference (tensor parallelism) gives none either."""
    from gnnq.bench.compare import Point, _compare_point

    grid = next(n for n in PARALLEL.names() if PARALLEL.choice(n).messages == "grid")
    halo = Point(0, [], "sync", (), {0: _record("sync", 1.0, 1000)})
    against_grid = _compare_point(halo, grid, {0: _record(grid, 2.0, 4000)}, None)
    assert not against_grid["bound_applies"] and against_grid["bound_overlap"] is None
    against_halo = _compare_point(halo, "sync", {0: _record("sync", 2.0, 4000)}, None)
    assert against_halo["bound_applies"] and against_halo["bound_overlap"] is not None
