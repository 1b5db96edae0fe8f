"""cluster=multinode: gnnq on the first node, the printed torchrun command by hand on the others (here: one machine)."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys

from tests.cli_helpers import read_record, run_dirs

SMALL = ["logger=none", "dataset.num_nodes=1500", "model.hidden=32", "trainer.epochs=6"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_printed_command_run_on_a_second_node_joins_the_run(tmp_path):
    env = {
        **os.environ,
        "GNNQ_RUNS": str(tmp_path / "runs"),
        "GNNQ_DATA": str(tmp_path / "data"),
        "WANDB_SILENT": "true",
    }
    env.pop("GNNQ_FAULT_INJECT", None)
    endpoint = f"127.0.0.1:{_free_port()}"
    args = ["cluster=multinode", "cluster.hosts=2", "cluster.nproc=1", f"cluster.rendezvous={endpoint}", *SMALL]
    first = subprocess.Popen(
        [sys.executable, "-m", "gnnq.cli", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    other = None
    try:
        marker = "[gnnq] on each of the other 1 node(s), run: "
        for line in first.stdout:
            if line.startswith(marker):
                cmd = shlex.split(line[len(marker) :])
                break
        else:
            raise AssertionError(f"no command printed: {first.stderr.read()}")
        assert cmd[1:5] == ["-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1"]
        assert f"--rdzv-endpoint={endpoint}" in cmd
        other = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)  # "the other node"
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert other.returncode == 0, other.stderr[-2000:]
    assert first.returncode == 0, err
    (run_dir,) = run_dirs(tmp_path / "runs")
    record = read_record(run_dir)
    assert record["status"] == "ok" and record["world_size"] == 2
    assert record["config"]["cluster"]["rendezvous"] == endpoint
