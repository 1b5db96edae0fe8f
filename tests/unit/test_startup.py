"""A local job's start and stop without torchrun's agent (issue 29 item 1, issue 31 items 10-13): the launcher
starts and follows the ranks itself (gnnq.launch.ranks), plans a run whose parts are cached without loading the
dataset or importing torch (gnnq.data.summary), and names the rank that ended first. Fast: no torch in the ranks
here (stand-in rank commands), one small synthetic graph."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gnnq.launch import ranks
from gnnq.launch.failure import describe_failure


def _job(tmp_path: Path, nproc: int, code: str):
    """A _Job of ``nproc`` stand-in ranks running ``code`` (RANK etc. in their environment)."""
    log = open(tmp_path / "job.log", "w")
    rows: list[dict] = []
    job = ranks._Job(nproc, log, rows.append, tmp_path / ".gnnq" / "exits.json")
    (tmp_path / ".gnnq").mkdir(exist_ok=True)
    job.start([sys.executable, "-c", code], tmp_path / "elastic" / "attempt_0")
    return job, rows, log


def test_the_first_rank_to_fail_is_recorded_first_and_the_others_are_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(ranks, "STOP_GRACE_S", 1.0)
    code = (
        "import os, sys, time\n"
        "r = int(os.environ['RANK'])\n"
        "print(f'@@gnnq-progress {{\"epoch\": 1, \"rank\": {r}}}' if r == 0 else 'rank 1 says hello', flush=True)\n"
        f"said = {str(tmp_path / 'rank0-said')!r}\n"
        "if r == 0: open(said, 'w').close()\n"
        "while r == 1 and not os.path.exists(said): time.sleep(0.05)\n"  # rank 0's line is out, however slow it started
        "if r == 1: time.sleep(0.3); sys.exit(3)\n"
        "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)\n"  # must be SIGKILLed
    )
    job, rows, log = _job(tmp_path, 2, code)
    started = time.monotonic()
    assert job.follow() == 1
    job.close()
    log.close()
    assert time.monotonic() - started < 10
    exits = json.loads((tmp_path / ".gnnq" / "exits.json").read_text())["exits"]
    assert [(e["rank"], e["code"], e["stopped_by_gnnq"]) for e in exits] == [(1, 3, False), (0, -9, True)]
    assert rows == [{"epoch": 1, "rank": 0}]
    assert "rank 1 says hello" in (tmp_path / "job.log").read_text()


def test_the_ranks_get_torchruns_environment_and_rank_0_the_store_socket(tmp_path):
    code = (
        "import os, json, socket\n"
        "e = os.environ\n"
        "fd = e.get('GNNQ_STORE_FD')\n"
        "bound = socket.socket(fileno=int(fd)).getsockname() if fd else None\n"
        "keys = ('RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', "
        "'GLOO_SOCKET_IFNAME', 'TORCHELASTIC_ERROR_FILE')\n"
        "print(json.dumps({**{k: e.get(k) for k in keys}, 'bound': bound}), flush=True)\n"
    )
    job, _, log = _job(tmp_path, 2, code)
    assert job.follow() == 0
    job.close()
    log.close()
    seen = _json_objects((tmp_path / "job.log").read_text())  # the two ranks share one pipe: lines can run together
    by_rank = {int(s["RANK"]): s for s in seen}
    assert set(by_rank) == {0, 1}
    for r, s in by_rank.items():
        assert s["LOCAL_RANK"] == str(r) and s["WORLD_SIZE"] == s["LOCAL_WORLD_SIZE"] == "2"
        assert s["MASTER_ADDR"] == "127.0.0.1" and s["GLOO_SOCKET_IFNAME"] in (
            "lo",
            os.environ.get("GLOO_SOCKET_IFNAME"),
        )
        assert s["TORCHELASTIC_ERROR_FILE"].endswith(f"attempt_0/{r}/error.json")
    assert by_rank[0]["bound"] == ["127.0.0.1", int(by_rank[0]["MASTER_PORT"])]  # loopback only
    assert by_rank[1]["bound"] is None


def _json_objects(text: str) -> list[dict]:
    decoder, found, at = json.JSONDecoder(), [], text.find('{"RANK"')
    while at >= 0:
        obj, end = decoder.raw_decode(text, at)
        found.append(obj)
        at = text.find('{"RANK"', end)
    return found


def test_a_stopped_launcher_stops_its_ranks_within_the_interrupt_grace(tmp_path):
    job, _, log = _job(tmp_path, 2, "import time; time.sleep(60)")
    started = time.monotonic()
    job.stop(ranks.INTERRUPT_GRACE_S)
    job.close()
    log.close()
    assert time.monotonic() - started < ranks.INTERRUPT_GRACE_S + 2
    assert all(p.poll() is not None for p in job.procs)


def _failed_local_job(tmp_path: Path, exits: list[tuple[int, int, bool]], reports: list[dict]) -> Path:
    from gnnq.track.files import write_json_atomic

    (tmp_path / "logs").mkdir(parents=True, exist_ok=True)
    (tmp_path / "logs" / "torchrun.log").write_text("[gnnq] rank ... exited\n")
    rows = [{"rank": r, "code": c, "time": 1000.0 + i, "stopped_by_gnnq": s} for i, (r, c, s) in enumerate(exits)]
    write_json_atomic(tmp_path / ".gnnq" / "exits.json", {"ranks": 2, "exits": rows})
    for r in reports:
        write_json_atomic(tmp_path / ".gnnq" / f"error-rank{r['rank']}.json", {"traceback": "", **r})
    return tmp_path


def test_the_rank_killed_first_is_named_not_rank_0(tmp_path):
    """Rank 1 killed by SIGKILL before the first epoch; rank 0, stuck in C++ where SIGTERM waits, got SIGKILL."""
    run_dir = _failed_local_job(tmp_path, [(1, -9, False), (0, -9, True)], [])
    assert describe_failure(run_dir, 1).startswith("rank 1 was killed by SIGKILL without reporting an error")


def test_a_rank_stopped_by_sigterm_from_outside_is_named_with_the_signal(tmp_path):
    stopped = "StoppedBySignal: stopped by SIGTERM (another rank failed or the job was stopped)"
    reports = [
        {"rank": 1, "message": stopped, "time": 1000.0, "stopped": True},
        {"rank": 0, "message": stopped, "time": 1001.0, "stopped": True},
    ]
    run_dir = _failed_local_job(tmp_path, [(1, 1, False), (0, 1, True)], reports)
    line = describe_failure(run_dir, 1)
    assert line.startswith("rank 1 was stopped by SIGTERM from outside gnnq"), line


def test_a_rank_stopped_from_outside_is_named_when_its_peer_ended_first(tmp_path):
    """Under load rank 0 may end first with a closed connection (the catalogue's faults/rank1-sigterm saw it): the
    signal that stopped rank 1 is still the cause, not rank 0's lost peer."""
    closed = "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:5019."
    reports = [
        {"rank": 0, "message": closed, "time": 1000.0, "stopped": False},
        {"rank": 1, "message": "StoppedBySignal: stopped by SIGTERM (...)", "time": 1000.5, "stopped": True},
    ]
    run_dir = _failed_local_job(tmp_path, [(0, 1, False), (1, 1, False)], reports)
    line = describe_failure(run_dir, 1)
    assert line.startswith("rank 1 was stopped by SIGTERM from outside gnnq"), line


def test_an_error_of_its_own_is_named_before_a_rank_stopped_from_outside_later(tmp_path):
    reports = [
        {"rank": 0, "message": "RuntimeError: CUDA out of memory", "time": 1000.0, "stopped": False},
        {"rank": 1, "message": "StoppedBySignal: stopped by SIGTERM (...)", "time": 1000.5, "stopped": True},
    ]
    run_dir = _failed_local_job(tmp_path, [(0, 1, False), (1, 1, False)], reports)
    assert describe_failure(run_dir, 1).startswith("rank 0 failed: RuntimeError: CUDA out of memory")


def test_a_checkpoint_of_another_shape_is_named_and_not_loaded(tmp_path):
    import torch

    from gnnq.train.checkpoint import CheckpointError, _load_into

    saved = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Linear(16, 3)).state_dict()
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Linear(32, 3))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError) as err:
        _load_into(model, "model", saved, tmp_path)
    line = str(err.value)
    assert "does not match the run's config: model.0.weight has shape [16, 8] in the checkpoint, [32, 8]" in line
    assert "\n" not in line
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_a_second_stop_signal_does_not_cut_the_first_short():
    code = (
        "import os, signal, sys, time\n"
        "from gnnq.launch import interrupts\n"
        "interrupts.install()\n"
        "try:\n"
        "    os.kill(os.getpid(), signal.SIGHUP); time.sleep(5)\n"
        "except KeyboardInterrupt:\n"
        "    os.kill(os.getpid(), signal.SIGINT); time.sleep(0.2)\n"  # the stop under way goes on
        "    sys.exit(interrupts.exit_code(interrupts.received()))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 129, res.stderr


def test_the_gpus_come_from_the_driver_without_torch(tmp_path, monkeypatch):
    from gnnq.track.machine import driver_gpu_names

    for bus, model in [("0000:01:00.0", "NVIDIA H200"), ("0000:02:00.0", "NVIDIA A100")]:
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(f"Model: \t\t {model}\nIRQ: 1\n")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert driver_gpu_names(str(tmp_path)) == ["NVIDIA H200", "NVIDIA A100"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert driver_gpu_names(str(tmp_path)) == ["NVIDIA A100"]
    assert driver_gpu_names(str(tmp_path / "none")) == []


def test_torchs_cuda_version_is_read_without_importing_torch():
    code = (
        "import sys; from gnnq.track.record import versions; v = versions(); print(v['cuda'], 'torch' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    import torch

    assert res.stdout.split() == [str(torch.version.cuda), "False"], res.stderr


def test_a_changed_source_file_changes_the_recipe(tmp_path):
    from gnnq.data.summary import recipe

    (tmp_path / "edges.csv").write_text("0,1\n")
    first = recipe({"name": "files"}, [tmp_path])
    assert recipe({"name": "files"}, [tmp_path]) == first
    (tmp_path / "edges.csv").write_text("0,1\n1,2\n")
    assert recipe({"name": "files"}, [tmp_path]) != first
    assert recipe({"name": "files", "seed": 1}, [tmp_path]) != recipe({"name": "files"}, [tmp_path])
