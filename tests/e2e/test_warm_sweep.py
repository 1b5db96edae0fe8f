"""The warm launcher (a local multirun's default, hydra_plugins/gnnq_warm_launcher, gnnq/launch/warm_pool.py), through
the real command line on Cora: a point's record equals the same point run alone (its own ranks, gnnq.launch.ranks);
a failing point fails alone and the points after it run; a rank of the pool killed mid-point fails that point only,
the pool is replaced and nothing of it outlives the sweep.

Here: the real command-line runs; a single run's faults are in `tests/e2e/test_faults.py`.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from gnnq.track.wandb_file import read_offline_run
from tests.cli_helpers import TIME_KEYS, read_metrics, read_record, run_gnnq, start_gnnq
from tests.e2e.test_exposure import _is_loopback
from tests.e2e.test_faults import wait_for_training
from tests.unit.test_exposure import _listening, _tree

CORA = ["dataset=cora", "cluster.nproc=2", "model.hidden=16", "trainer.epochs=3"]
# differ between two runs of one config: when and where it ran, how long, its peak memory; a multirun's W&B group
VARYING = {"run_dir", "finished_at", "wall_time_s", "peak_memory_mib_per_rank", *TIME_KEYS}


def _untimed(value):
    """``value`` without what differs between two runs of one config: times at any depth (AdaQP's solve times)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in VARYING and "time_s" not in k}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _comparable(record: dict) -> dict:
    out = _untimed(record)
    out["config"] = {**record["config"], "logger": {**record["config"]["logger"], "group": None}}  # a sweep's group
    return out


def _pool_log(run_dir: Path) -> str:
    return (run_dir / "logs" / "torchrun.log").read_text().splitlines()[0]


def _pool_ranks(root: int) -> dict[int, int]:
    """{rank: pid} of the warm pool's rank processes under the process ``root``."""
    ranks = {}
    for pid in _tree(root):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gnnq.rank.serve" in cmdline:
            rank = [e for e in environ if e.startswith(b"RANK=")][0]
            ranks[int(rank.split(b"=")[1])] = pid
    return ranks


def test_a_warm_points_record_equals_the_same_point_run_alone(tmp_path, planetoid_root):
    sweep, alone = tmp_path / "sweep", tmp_path / "alone"
    # AdaQP (overlap: a process group of its own; adaptive widths: the assigner's state and caches), its widths
    # from a fixed time model: with the measured one (time_model=profile) even two cold runs may send other bytes
    adaqp = ["experiment=adaqp", "quantizer.time_model=fixed", "quantizer.assign_cycle=2"]
    args = [*CORA, *adaqp, "logger=wandb", "logger.mode=offline"]
    res = run_gnnq(["-m", *args, "trainer.seed=0,1", f"hydra.sweep.dir={sweep}"], tmp_path / "runs", planetoid_root)
    assert res.returncode == 0, res.stderr[-3000:]
    first, second = sweep / "0_trainer.seed=0", sweep / "1_trainer.seed=1"
    assert _pool_log(first).endswith("starting a warm pool of 2 rank(s)")
    assert _pool_log(second).endswith("the warm pool of 2 rank(s) started earlier"), "the second point reused it"
    res = run_gnnq([*args, "trainer.seed=1", f"hydra.run.dir={alone}"], tmp_path / "runs", planetoid_root)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "launching 2 rank(s)" in res.stdout and "warm pool" not in res.stdout  # a single run: its own ranks
    warm, cold = read_record(second), read_record(alone)
    assert warm["status"] == "ok" and warm["test"] == cold["test"] and warm["best_val"] == cold["best_val"]
    assert warm["comm_bytes_per_epoch"] == cold["comm_bytes_per_epoch"]
    assert _comparable(warm) == _comparable(cold)  # accuracy, bytes, resolved config, everything but times
    assert _untimed(read_metrics(second)) == _untimed(read_metrics(alone))  # every row
    assert read_record(first)["test"] != warm["test"], "each point has its own seed"
    # each point its own W&B run, whose summary is its record's
    for run_dir in (first, second):
        (wandb_dir,) = (run_dir / "wandb").glob("offline-run-*")
        run = read_offline_run(wandb_dir)
        assert run.summary["test"] == read_record(run_dir)["test"] and len(run.history) == 3


def test_a_warm_sweep_over_sparse_features_runs_every_point_as_alone(tmp_path):
    """A files graph with features.npz: the pool keeps its parts (a sparse CSR x) and hands each point a copy of
    its own (copy.deepcopy cannot copy a CSR tensor: every point failed with 'Cannot access storage of
    SparseCsrTensorImpl'); the copied part trains as the part read from disk."""
    from benchmarks.wide_sparse_graph import make, write

    write(tmp_path / "graph", *make(400, 300, 6, 4, degree=10.0, homophily=0.8, signal=0.6, seed=0))
    graph = tmp_path / "graph" / "sparse"
    assert (graph / "features.npz").is_file() and not (graph / "features.npy").exists()
    sweep, alone, runs = tmp_path / "sweep", tmp_path / "alone", tmp_path / "runs"
    args = ["dataset=files", f"dataset.path={graph}", "cluster.nproc=2", "model.hidden=16", "trainer.epochs=3"]
    args += ["logger=none"]
    res = run_gnnq(["-m", *args, "trainer.grad_sync.mode=allreduce,fp16", f"hydra.sweep.dir={sweep}"], runs, runs)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"[gnnq] sweep finished in {sweep}: 2 ok, 0 failed" in res.stdout
    first, second = sweep / "0_trainer.grad_sync.mode=allreduce", sweep / "1_trainer.grad_sync.mode=fp16"
    assert _pool_log(second).endswith("the warm pool of 2 rank(s) started earlier"), "the second point reused it"
    res = run_gnnq([*args, "trainer.grad_sync.mode=fp16", f"hydra.run.dir={alone}"], runs, runs)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    warm, cold = read_record(second), read_record(alone)
    assert warm["status"] == "ok" and warm["test"] == cold["test"] and warm["best_val"] == cold["best_val"]
    assert warm["comm_bytes_per_epoch"] == cold["comm_bytes_per_epoch"]
    assert _untimed(read_metrics(second)) == _untimed(read_metrics(alone))  # every row
    grad = [read_record(d)["summary"]["grad_sync_bytes_per_epoch"] for d in (first, second)]
    assert grad[1] * 2 == grad[0], grad  # fp16 sums half of allreduce's bytes: each point ran its own mode


def test_a_failing_point_fails_alone_and_the_next_points_run(tmp_path, planetoid_root):
    sweep = tmp_path / "sweep"
    # lr 1e30 without normalization: the loss is NaN at epoch 2, every rank raises NonFiniteLossError
    args = ["-m", *CORA, "logger=none", "model.norm=none", "trainer.lr=0.01,1e30,0.02", f"hydra.sweep.dir={sweep}"]
    res = run_gnnq(args, tmp_path / "runs", planetoid_root)
    assert res.returncode == 1, res.stderr[-3000:]
    ok1, bad, ok2 = (read_record(d) for d in sorted(sweep.glob("[0-9]_*")))
    assert bad["status"] == "failed" and "the training loss is nan at epoch 2" in bad["error"], bad["error"]
    assert ok1["status"] == "ok" and ok2["status"] == "ok"
    third = sorted(sweep.glob("2_*"))[0]
    assert _pool_log(third).endswith("starting a warm pool of 2 rank(s)"), "the point after a failure starts clean"
    assert f"[gnnq] sweep finished in {sweep}: 2 ok, 1 failed" in res.stdout


def test_a_killed_pool_rank_fails_its_point_and_the_pool_is_replaced(tmp_path, planetoid_root):
    sweep, runs = tmp_path / "sweep", tmp_path / "runs"
    args = ["-m", *CORA[:3], "logger=none", "trainer.epochs=100000,3", f"hydra.sweep.dir={sweep}"]
    proc = start_gnnq(args, runs, planetoid_root)
    listening: set[tuple] = set()
    try:
        first = wait_for_training(proc, sweep, timeout_s=180)
        listening |= _listening(_tree(proc.pid))
        ranks = _pool_ranks(proc.pid)
        assert sorted(ranks) == [0, 1], ranks
        os.kill(ranks[1], signal.SIGKILL)
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err[-3000:]
    record = read_record(first)
    assert record["status"] == "failed" and "rank 1 was killed by SIGKILL" in record["error"], record["error"]
    second = sorted(sweep.glob("1_*"))[0]
    assert read_record(second)["status"] == "ok"
    assert _pool_log(second).endswith("starting a warm pool of 2 rank(s)")
    assert listening and all(_is_loopback(ip) for ip, _port in listening), (
        f"the pool listens beyond loopback: {listening}"
    )
    time.sleep(0.5)
    left = [pid for pid in ranks.values() if Path(f"/proc/{pid}").exists() and _alive(pid)]
    assert left == [], f"pool ranks outlived the sweep: {left}"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_a_stopped_warm_sweep_leaves_no_pool_rank(tmp_path, planetoid_root, sig):
    """Ctrl-C: the point's record says interrupted, exit 130, the pool stopped; SIGKILL to the launcher: the pool's
    ranks die with it (their parent-death signal)."""
    sweep, runs = tmp_path / "sweep", tmp_path / "runs"
    args = ["-m", *CORA[:3], "logger=none", "trainer.epochs=100000", "trainer.seed=0,1", f"hydra.sweep.dir={sweep}"]
    proc = start_gnnq(args, runs, planetoid_root)
    try:
        first = wait_for_training(proc, sweep, timeout_s=180)
        ranks = _pool_ranks(proc.pid)
        assert sorted(ranks) == [0, 1], ranks
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 10
    while (left := [pid for pid in ranks.values() if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], f"pool ranks outlived the sweep: {left}"
    if sig == signal.SIGINT:
        assert proc.returncode == 130, err[-3000:]
        assert read_record(first)["error"].startswith("interrupted (SIGINT)")
        assert not list(sweep.glob("1_*")), "no point after Ctrl-C"


def test_a_pool_started_from_a_thread_that_ends_keeps_its_ranks():
    """A rank's parent-death signal fires when the *thread* that started it ends: the pool's ranks are started by
    a thread that lives as long as the launcher, whichever thread asked for them."""
    from gnnq.launch.warm_pool import RankPool

    pools: list[RankPool] = []
    starter = threading.Thread(target=lambda: pools.append(RankPool((2, 120.0))))
    starter.start()
    starter.join(timeout=180)
    assert pools, "the pool did not start"
    try:
        time.sleep(1.0)  # the starting thread has ended: a rank it had started itself would be gone by now
        assert pools[0].healthy(), [p.poll() for p in pools[0].procs]
    finally:
        pools[0].close()
    assert all(p.poll() is not None for p in pools[0].procs)
