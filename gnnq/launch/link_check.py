"""Measure what an emulated link carries: host 0 sends N MiB to host 1 over gloo, as the ranks' messages travel.

``python -m gnnq.launch.link_check --bandwidth-mbit 100 --mib 16`` builds a 2-host topology, measures,
tears it down and prints one JSON object (``mbit_per_s`` achieved, ``configured_mbit``). Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from gnnq.launch import netns

PORT = 29500


def measure(topo: netns.Topology, mib: float, timeout_s: float = 120.0) -> dict:
    """Send ``mib`` MiB from host 0 to host 1 of ``topo`` (one gloo process in each); the receiver's timing."""
    env = {**os.environ, "GLOO_SOCKET_IFNAME": netns.HOST_IFNAME, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                topo.host_ns(h),
                sys.executable,
                "-m",
                "gnnq.launch.link_check",
                "--peer",
                str(h),
                "--master",
                topo.host_addr(0),
                "--mib",
                str(mib),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for h in (0, 1)
    ]
    try:
        outs = [p.communicate(timeout=timeout_s) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError(f"link_check peer failed ({p.returncode}): {err.strip()[-2000:]}")
    result = json.loads(outs[1][0].strip().splitlines()[-1])
    return {**result, "configured_mbit": topo.link.bandwidth_mbit}


def _peer(rank: int, master: str, mib: float) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://{master}:{PORT}", rank=rank, world_size=2)
    payload = torch.ones(int(mib * 2**20), dtype=torch.uint8)
    warmup = torch.ones(2**16, dtype=torch.uint8)  # opens the connection and grows the TCP window a little
    if rank == 0:
        dist.send(warmup, dst=1)
    else:
        dist.recv(warmup, src=0)
    dist.barrier()
    t0 = time.perf_counter()
    if rank == 0:
        dist.send(payload, dst=1)
    else:
        dist.recv(payload, src=0)
        seconds = time.perf_counter() - t0
        print(
            json.dumps(
                {"bytes": payload.numel(), "seconds": seconds, "mbit_per_s": payload.numel() * 8 / seconds / 1e6}
            )
        )
    dist.barrier()
    dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bandwidth-mbit", type=float, default=100.0)
    parser.add_argument("--mib", type=float, default=16.0)
    parser.add_argument("--peer", type=int, help=argparse.SUPPRESS)  # internal: run one end inside a namespace
    parser.add_argument("--master", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peer is not None:
        _peer(args.peer, args.master, args.mib)
        return
    topo = netns.create(2, netns.LinkSpec(args.bandwidth_mbit))
    try:
        print(json.dumps(measure(topo, args.mib)))
    finally:
        netns.teardown(topo)


if __name__ == "__main__":
    main()
