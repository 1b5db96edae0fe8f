"""Fit error of AdaQP's channel time model at the sizes adaptive messages have, by profile range.

    python -m benchmarks.profile_fit --data DIR --out results/adaqp_fidelity/profile_fit [--nproc 4]

On the dataset's real partitions (METIS, one gloo rank per part on this machine), every rank
fits the time model of ``quantizer.profile_range`` fp32 (gnnq before issue 18: 1/8 to 2x the
fp32 message, at least 1 MiB) and sent (AdaQP's range: the 2- to the 8-bit message), then times
held-out messages of exactly the 2-, 4- and 8-bit sizes of every channel. Per channel and round:
each fit's R² on its own profile and the relative error of its prediction against the held-out
median at each width. Rounds repeat the three steps so machine load falls on both alike.
Writes results.json and README.md (command, machine, load, tables).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import socket
import statistics
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist

from gnnq.adaptive.time_model import fit_time_model
from gnnq.bench.machine import describe_machine
from gnnq.comm import Communicator
from gnnq.comm.channel_profile import profile_channels
from gnnq.comm.kernels.torch_codec import row_bytes
from gnnq.track.progress import markdown_table

WIDTHS = (2, 4, 8)
RANGES = ("fp32", "sent")


def message_sizes(send_counts: list[int], halo_counts: list[int], dim: int) -> dict:
    """Per peer, the message one way at fp32 and at every width (rows: the larger of the two directions)."""
    rows = [max(s, r) for s, r in zip(send_counts, halo_counts)]
    sizes = {b: [n * int(row_bytes(dim, b, torch.float16)) for n in rows] for b in WIDTHS}
    return {"fp32": [n * dim * 4 for n in rows], **sizes}


def _rank(
    rank: int, world_size: int, port: int, parts: list, dim: int, rounds: int, repeats: int, out_dir: str
) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        comm = Communicator()
        part = parts[rank]
        sizes = message_sizes(part.send_counts.tolist(), part.halo_counts.tolist(), dim)
        held_rounds = [[0 if q == rank else n for q, n in enumerate(sizes[b])] for b in WIDTHS]
        result = []
        for _ in range(rounds):
            fits = {
                "fp32": fit_time_model(comm, sizes["fp32"]).to_record(),
                "sent": fit_time_model(comm, sizes[WIDTHS[-1]], low_bytes=sizes[WIDTHS[0]]).to_record(),
            }
            held = profile_channels(comm, held_rounds, repeats)
            result.append({"fits": fits, "held": {f"{s}->{d}": v for (s, d), v in held.items()}})
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
        comm.barrier()
    finally:
        dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)


def summarize(per_rank: list[list[dict]]) -> list[dict]:
    """One row per (round, channel, range): R² and the relative error at each width."""
    rows = []
    for k, fits_round in enumerate(per_rank[0]):
        held = {key: v for r in per_rank for key, v in r[k]["held"].items()}
        for name in RANGES:
            for fit in fits_round["fits"][name]:
                key = f"{fit['src']}->{fit['dst']}"
                by_size: dict[int, list[float]] = {}
                for nbytes, seconds in held[key]:
                    by_size.setdefault(nbytes, []).append(seconds)
                row = {"round": k, "channel": key, "range": name, "r2": fit["r2"]}
                for width, nbytes in zip(WIDTHS, sorted(by_size)):
                    measured = statistics.median(by_size[nbytes])
                    predicted = fit["a_s_per_byte"] * nbytes + fit["c_s"]
                    row[f"bytes_{width}"] = nbytes
                    row[f"rel_err_{width}"] = abs(predicted - measured) / measured
                rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.profile_fit",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data", type=Path, help="data root (default: $GNNQ_DATA)")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--nproc", type=int, default=4)
    p.add_argument("--dim", type=int, default=256, help="message width (AdaQP's hidden size)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5, help="held-out timings per size and round")
    args = p.parse_args(argv)
    if args.data:
        os.environ["GNNQ_DATA"] = str(args.data)
    import torch.multiprocessing as mp

    from gnnq.config.compose import compose_config
    from gnnq.data.part import build_parts
    from gnnq.data.partition import partition_nodes
    from gnnq.data.registry import load_dataset

    cfg = compose_config([f"dataset={args.dataset}"])
    graph = load_dataset(cfg.dataset)
    parts = build_parts(graph, partition_nodes(graph.edge_index, graph.num_nodes, args.nproc, "metis", 0), args.nproc)
    load_before = os.getloadavg()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(
            _rank,
            args=(args.nproc, port, parts, args.dim, args.rounds, args.repeats, out_dir),
            nprocs=args.nproc,
            join=True,
        )
        per_rank = [torch.load(os.path.join(out_dir, f"rank{r}.pt"), weights_only=False) for r in range(args.nproc)]
    rows = summarize(per_rank)
    command = "python -m benchmarks.profile_fit " + shlex.join(argv if argv is not None else sys.argv[1:])
    result = {
        "command": command,
        "machine": describe_machine(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "dataset": args.dataset,
        "nproc": args.nproc,
        "dim": args.dim,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "README.md").write_text(_readme(result))
    print((args.out / "README.md").read_text())


def _readme(result: dict) -> str:
    rows = result["rows"]

    def med(name: str, field: str) -> float:
        return statistics.median(r[field] for r in rows if r["range"] == name)

    summary = [
        [name, f"{med(name, 'r2'):.3f}", *(f"{100 * med(name, f'rel_err_{w}'):.1f}%" for w in WIDTHS)]
        for name in RANGES
    ]
    detail = [
        [r["round"], r["channel"], r["range"], f"{r['r2']:.3f}", *(f"{100 * r[f'rel_err_{w}']:.1f}%" for w in WIDTHS)]
        for r in sorted(rows, key=lambda r: (r["channel"], r["round"], r["range"]))
    ]
    m = result["machine"]
    load = ", ".join(f"{x:.2f}" for x in result["load_before"]), ", ".join(f"{x:.2f}" for x in result["load_after"])
    sizes = sorted({(r["channel"], *(r[f"bytes_{w}"] for w in WIDTHS)) for r in rows if r["round"] == 0})
    return "\n".join(
        [
            "# Time-model fit error by profile range (quantizer.profile_range)",
            "",
            f"Command: `{result['command']}`",
            "",
            f"Machine: {m.get('cpu', '?')}, {m.get('cores', '?')} cores, torch {m.get('torch', '?')}; load "
            "average (1, 5, 15 min) "
            f"before {load[0]}, after {load[1]} (shared with other jobs).",
            "",
            f"{result['dataset']}, {result['nproc']} ranks (METIS), messages of {result['dim']} columns; "
            "held-out sizes per "
            "channel are its 2-, 4- and 8-bit messages (fp16 row parameters), as adaptive widths send them.",
            "",
            "Medians over channels and rounds: R² of the fit on its own profile; relative error of its prediction "
            "against the held-out median time at each width.",
            "",
            markdown_table(["profile_range", "R²", *(f"error at {w}-bit" for w in WIDTHS)], summary),
            "",
            "Held-out sizes (bytes) per channel: " + "; ".join(f"{c}: {b2}/{b4}/{b8}" for c, b2, b4, b8 in sizes),
            "",
            "## Every channel and round",
            "",
            markdown_table(["round", "channel", "range", "R²", *(f"err {w}-bit" for w in WIDTHS)], detail),
            "",
        ]
    )


if __name__ == "__main__":
    main()
