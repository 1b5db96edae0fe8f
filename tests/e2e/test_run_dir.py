"""Bad places and faults end as one line, a non-zero exit and (where a run dir exists) a failed record, and
lose nothing that was there before: a reused or busy run dir, an unwritable runs root, a read-only dataset
root, a full disk at a checkpoint, SIGTERM. The real ``gnnq`` command line on real files; read-only and
full filesystems are real mounts (a read-only bind mount, a small tmpfs: root ignores permission bits)."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli_helpers import read_record, run_dirs, run_gnnq, start_gnnq
from tests.conftest import skip_or_fail

pytestmark = pytest.mark.machine_wide  # read-only bind mounts and a small tmpfs

SMALL = ["logger=none", "dataset.num_nodes=1500", "model.hidden=32", "trainer.epochs=3"]


def snapshot(directory: Path) -> dict[str, str]:
    """sha256 of every file below ``directory`` (relative path -> digest), but the run-dir lock (it names its
    holder)."""
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != "lock"
    }


@contextlib.contextmanager
def mounted(target: Path, *how: list[str]):
    """``target`` with the mounts ``how`` (each a mount argument list, run in order), unmounted at the end.
    Skips where mounting is not permitted (not root); GNNQ_REQUIRE_MOUNT=1 makes that a failure."""
    target.mkdir(parents=True, exist_ok=True)
    done = 0
    try:
        for args in how:
            res = subprocess.run(["mount", *args, str(target)], capture_output=True, text=True)
            if res.returncode != 0:
                skip_or_fail("GNNQ_REQUIRE_MOUNT", f"cannot mount here (needs root): {res.stderr.strip()}")
            done += not any("remount" in a for a in args)  # a remount changes a mount, it adds none
        yield target
    finally:
        for _ in range(done):
            subprocess.run(["umount", str(target)], check=True)


def read_only_view(source: Path, target: Path):
    """``source`` seen read-only at ``target`` (a read-only bind mount: refused even to root)."""
    return mounted(target, ["--bind", str(source)], ["-o", "remount,bind,ro"])


def test_a_run_dir_holding_a_record_is_refused_and_kept_and_overwrite_replaces_it(tmp_path):
    run_dir = tmp_path / "runs" / "fixed"
    first = run_gnnq([*SMALL, f"hydra.run.dir={run_dir}"], tmp_path / "runs", tmp_path / "data")
    assert first.returncode == 0, first.stderr
    before = snapshot(run_dir)
    again = run_gnnq([*SMALL, "trainer.epochs=2", f"hydra.run.dir={run_dir}"], tmp_path / "runs", tmp_path / "data")
    assert again.returncode == 2
    assert again.stderr.strip() == (
        f"gnnq: error: hydra.run.dir: {run_dir} already holds a run (record.json exists); continue it with "
        f"gnnq resume={run_dir}, choose a new directory, or replace it with overwrite=true"
    )
    after = snapshot(run_dir)
    assert after == before  # record, metrics, .hydra: all as they were
    replaced = run_gnnq(
        [*SMALL, "trainer.epochs=2", f"hydra.run.dir={run_dir}", "overwrite=true"], tmp_path / "runs", tmp_path / "data"
    )
    assert replaced.returncode == 0, replaced.stderr
    assert read_record(run_dir)["config"]["trainer"]["epochs"] == 2
    assert len((run_dir / "metrics.jsonl").read_text().splitlines()) == 2


def test_a_second_gnnq_on_a_busy_run_dir_exits_at_once_and_sigterm_exits_143(tmp_path):
    run_dir = tmp_path / "runs" / "busy"
    proc = start_gnnq(
        [*SMALL, "trainer.epochs=100000", f"hydra.run.dir={run_dir}"], tmp_path / "runs", tmp_path / "data"
    )
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "metrics.jsonl").is_file() or not (run_dir / "metrics.jsonl").read_text():
            assert proc.poll() is None and time.monotonic() < deadline, "training never started"
            time.sleep(0.2)
        started = time.monotonic()
        second = run_gnnq([*SMALL, f"hydra.run.dir={run_dir}"], tmp_path / "runs", tmp_path / "data")
        assert time.monotonic() - started < 60
        assert second.returncode == 2
        assert second.stderr.strip() == (
            f"gnnq: error: hydra.run.dir: {run_dir} is in use by another gnnq (pid {proc.pid}); "
            "wait for it to end, or give this run another directory"
        )
        assert proc.poll() is None, "the first run must go on"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert (
        err.strip().splitlines()[-1]
        == "gnnq: interrupted (SIGTERM); all ranks stopped, the run record is marked failed"
    )
    record = read_record(run_dir)
    assert record["status"] == "failed" and record["error"] == "interrupted (SIGTERM); all ranks were stopped"
    epochs = [
        int(line.split('"epoch": ')[1].split(",")[0]) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert epochs == list(range(1, len(epochs) + 1)), "one run's rows only, in order"


def test_a_file_in_place_of_the_runs_root_is_named(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("keep me\n")
    res = run_gnnq(SMALL, blocker / "runs", tmp_path / "data")  # GNNQ_RUNS below a file
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"gnnq: error: GNNQ_RUNS: {blocker} is a file, not a directory, so {blocker}/runs/")
    assert line.endswith("cannot be created; set GNNQ_RUNS to a writable directory")
    res = run_gnnq([*SMALL, f"runs_root={blocker}"], tmp_path / "runs", tmp_path / "data")
    assert res.returncode == 2 and res.stderr.startswith(
        f"gnnq: error: runs_root: {blocker} is a file, not a directory"
    )
    assert blocker.read_text() == "keep me\n"


def test_a_read_only_runs_root_is_named(tmp_path):
    (tmp_path / "src").mkdir()
    with read_only_view(tmp_path / "src", tmp_path / "ro") as ro:
        res = run_gnnq(SMALL, ro / "runs", tmp_path / "data")
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"gnnq: error: GNNQ_RUNS: cannot create directories in {ro} (Read-only file system (EROFS))")
    assert list((tmp_path / "src").iterdir()) == []


def test_a_read_only_dataset_root_with_complete_files_is_read(tmp_path, planetoid_root):
    data = tmp_path / "data"
    shutil.copytree(planetoid_root / "Cora", data / "Cora")
    args = ["logger=none", "dataset=cora", "model.hidden=16", "trainer.epochs=2"]
    assert run_gnnq(args, tmp_path / "runs", data).returncode == 0  # processes Cora and caches its parts
    before = snapshot(data)
    with read_only_view(data, tmp_path / "ro") as ro:
        res = run_gnnq(args, tmp_path / "runs", ro)
    assert res.returncode == 0, res.stderr
    assert snapshot(data) == before
    records = [read_record(d) for d in run_dirs(tmp_path / "runs")]
    assert [r["status"] for r in records] == ["ok", "ok"]
    assert records[0]["test"] == records[1]["test"]


def test_dataset_lock_on_a_read_only_root_locks_the_directory(tmp_path):
    """The decision behind the test above: no lock file can be created there, the directory's own lock still
    keeps two loads apart, and a root that cannot even hold the dataset folder is named."""
    import fcntl
    import os

    from gnnq.data.loaders import dataset_lock
    from gnnq.errors import DatasetError

    (tmp_path / "src" / "Cora").mkdir(parents=True)
    with read_only_view(tmp_path / "src", tmp_path / "ro") as ro:
        with dataset_lock(ro / "Cora"):
            fd = os.open(ro / "Cora", os.O_RDONLY | os.O_DIRECTORY)
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.close(fd)
        with pytest.raises(
            DatasetError, match=rf"cannot create the dataset folder {ro}/Reddit \(Read-only file system \(EROFS\)\)"
        ):
            with dataset_lock(ro / "Reddit"):
                pass
    assert [p.name for p in (tmp_path / "src" / "Cora").iterdir()] == []


def test_a_full_disk_at_a_checkpoint_is_named_and_the_previous_checkpoint_stays(tmp_path):
    # each checkpoint of this run is ~660 KB (2 ranks): the one of epoch 2 fits into 1 MiB, the next one does not
    with mounted(tmp_path / "small", ["-t", "tmpfs", "-o", "size=1m", "tmpfs"]) as small:
        run_dir = small / "run"
        args = [
            "logger=none",
            "dataset.num_nodes=1500",
            "model.hidden=128",
            "trainer.epochs=6",
            "trainer.checkpoint_every=2",
            f"hydra.run.dir={run_dir}",
        ]
        res = run_gnnq(args, tmp_path / "runs", tmp_path / "data")
        record = read_record(run_dir)
        latest = (run_dir / "checkpoints" / "latest.json").read_text()
        kept = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
        from gnnq.train.checkpoint import verify_checkpoint

        verified = verify_checkpoint(run_dir)
    assert res.returncode == 1
    line = res.stderr.strip().splitlines()[-1]
    assert "enforce fail" not in res.stderr and "Traceback" not in res.stderr
    assert line == f"gnnq: error: {record['error']}" and record["status"] == "failed"
    assert "CheckpointError: checkpoint of epoch 4 not written: No space left on device (ENOSPC) writing " in line
    assert f"{run_dir}/checkpoints/epoch-000004/rank" in line and "the checkpoint of epoch 2 is intact" in line
    assert kept == ["epoch-000002", "latest.json"] and '"epoch": 2' in latest and verified["epoch"] == 2
