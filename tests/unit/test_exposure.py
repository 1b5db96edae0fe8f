"""Secrets and exposure: the W&B key never reaches a file or the output; a local job listens on loopback only.

One real ``gnnq`` run (2 ranks, W&B offline) with a fake WANDB_API_KEY in its environment and HOME,
XDG dirs, W&B dirs and TMPDIR all pointed into the test's directory, so every file the run, W&B,
torchrun and the report write lands where the test scans it. While the job runs, the test records
the TCP addresses that any process of the job listens on.

Here: the in-process cases (no process started); the others are in `tests/e2e/test_exposure.py`.
"""

from __future__ import annotations

import ipaddress
import os
import sys
from pathlib import Path

import pytest

from gnnq.launch.ranks import rank_command

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            out.setdefault(ppid, []).append(int(entry))
    return out


def _tree(root: int) -> set[int]:
    children, todo, seen = _children(), [root], set()
    while todo:
        pid = todo.pop()
        seen.add(pid)
        todo.extend(children.get(pid, []))
    return seen


def _address(field: str) -> tuple[ipaddress._BaseAddress, int]:
    ip_hex, port_hex = field.split(":")
    raw = bytes.fromhex(ip_hex)
    raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # /proc/net: 32-bit words in host order
    return ipaddress.ip_address(raw), int(port_hex, 16)


def _listening(pids: set[int]) -> set[tuple]:
    """(address, port) of every TCP socket in LISTEN state held by one of ``pids``."""
    table = {}
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A":
                table[f[9]] = _address(f[1])
    found = set()
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in table:
                found.add(table[target[8:-1]])
    return found


def test_the_local_ranks_start_without_torchrun():
    cmd = rank_command(Path("/runs/r"), Path("/parts/p"))
    assert cmd == [sys.executable, "-m", "gnnq.rank", "--run-dir", "/runs/r", "--parts", "/parts/p"]


def test_rank_0s_store_on_the_launchers_socket_listens_on_127_0_0_1_only():
    """A local job's store as rank 0 serves it (gnnq.rank.worker.init_group) on the socket the launcher bound
    (gnnq.launch.ranks); torch alone would bind every interface."""
    import socket

    import torch.distributed as dist

    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=True, wait_for_workers=False, master_listen_fd=sock.detach())
    listening = {(ip, p) for ip, p in _listening({os.getpid()}) if p == port}
    assert listening and all(str(ip) == "127.0.0.1" for ip, _ in listening), listening
    client = dist.TCPStore("127.0.0.1", port, 2, is_master=False)
    client.set("k", "v")
    assert store.get("k") == b"v"
