"""One short script for every check that needs a GPU, to run when a session is lent one.

    python -m tests.gpu.check --out $OUT [--device cuda] [--rows 65536] [--dim 256]

(``pytest tests/gpu`` runs the same checks as tests, skipped without CUDA.)

1. Triton codec == torch codec, bit for bit, on the device (every width, a few shapes), and the
   torch codec on the device == the torch codec on the CPU.
2. Codec throughput on the device: Triton quantize+pack and unpack against an fp32->fp16 copy.
3. Mixed-width wire layouts (adaptive) round-trip on the device within one step per row.
4. One training step, 2 ranks (gloo) sharing the device: ``overlap`` (side CUDA stream),
   ``stale`` (its warm-up epoch, side stream) and ``sampling`` at rate 1 equal ``sync`` to 1e-5
   relative, with fp32 and 8-bit messages.
5. The real command line on the device: ``gnnq experiment=adaqp cluster.nproc=1`` finishes,
   records the ``triton`` codec backend and CUDA peak memory.

Writes ``gpu_check.json`` and ``README.md`` under ``--out``; exits non-zero if a check fails.
``--device cpu`` runs the same script as a smoke test (Triton under TRITON_INTERPRET=1 if set).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

from benchmarks.gnnq_runs import command_line
from gnnq.bench.machine import describe_machine
from gnnq.comm.kernels import torch_codec, triton_codec
from gnnq.comm.kernels.philox import RowStreams
from gnnq.config.registry import FULL_GRAPH_TRAINER, PARALLEL
from gnnq.track.progress import markdown_table

WIDTHS = (1, 2, 4, 8)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn, device: torch.device, repeats: int = 10) -> float:
    fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def check_codec_identity(device: torch.device) -> dict:
    gen = torch.Generator(device=device).manual_seed(0)
    mismatches, device_dependent = [], []
    for rows, dim in ((7, 5), (300, 256), (64, 1500)):
        src = torch.randn(rows * 2, dim, device=device, generator=gen) * 3
        idx = torch.randperm(rows * 2, device=device, generator=gen)[:rows]
        streams = RowStreams.of_blocks([11, 2**40 + 3], [rows // 2, rows - rows // 2], device)
        for bits in WIDTHS:
            for pdt in (torch.float16, torch.float32):
                ref = torch_codec.quantize_rows(src, idx, streams, bits, pdt)[0]
                got = triton_codec.quantize_pack(src, idx, streams, bits, pdt)[0]
                back_ref = torch_codec.unpack_dequantize(ref, dim, bits, pdt)
                back = triton_codec.unpack_dequantize(got, dim, bits, pdt)
                cpu_streams = RowStreams(streams.keys.cpu(), streams.index.cpu())
                ref_cpu = torch_codec.quantize_rows(src.cpu(), idx.cpu(), cpu_streams, bits, pdt)[0]
                if not torch.equal(ref_cpu, ref.cpu()):
                    device_dependent.append(f"{rows}x{dim} {bits}-bit {pdt}")
                if not (torch.equal(ref, got) and torch.equal(back_ref, back)):
                    pbytes = 2 * torch.finfo(pdt).bits // 8
                    mismatches.append(
                        f"{rows}x{dim} {bits}-bit {pdt}: rows with other params "
                        f"{int((ref[:, :pbytes] != got[:, :pbytes]).any(1).sum())}, "
                        f"code bytes differing {int((ref[:, pbytes:] != got[:, pbytes:]).sum())}, "
                        f"decoded values differing {int((back_ref != back).sum())}"
                    )
    return {
        "ok": not (mismatches or device_dependent),
        "mismatches": mismatches,
        "torch_codec_differs_from_its_cpu_result": device_dependent,
    }


def check_codec_throughput(device: torch.device, rows: int, dim: int) -> dict:
    x = torch.randn(rows, dim, device=device)
    idx = torch.arange(rows, device=device)
    noise = torch.rand_like(x)
    streams = RowStreams.of_blocks([5], [rows], device)
    out = {"fp32->fp16 copy_s": _time(lambda: x.to(torch.float16), device)}
    for bits in (8, 4, 2):
        wire = triton_codec.quantize_pack(x, idx, streams, bits, torch.float16)[0]
        out[f"triton quantize+pack with draws {bits}-bit_s"] = _time(
            lambda: triton_codec.quantize_pack(x, idx, streams, bits, torch.float16), device
        )
        out[f"triton unpack {bits}-bit_s"] = _time(
            lambda: triton_codec.unpack_dequantize(wire, dim, bits, torch.float16), device
        )
        out[f"torch quantize+pack {bits}-bit_s"] = _time(
            lambda: torch_codec.quantize_pack(x, noise, bits, torch.float16), device
        )
    out["ok"] = True
    return out


def check_mixed_layout(device: torch.device) -> dict:
    from gnnq.comm.codec import NoiseKey, UniformCodec
    from gnnq.comm.encoder import MixedWidthEncoder
    from gnnq.comm.kernels.backends import kernels_for
    from gnnq.comm.wire_layout import WireLayout

    gen = torch.Generator().manual_seed(1)
    counts = [400, 0, 900, 300]
    rows = sum(counts)
    bits = torch.tensor((2, 4, 8))[torch.randint(0, 3, (rows,), generator=gen)]
    layout = WireLayout(bits, counts, bits, counts)
    src = torch.randn(rows, 256, generator=gen).to(device)
    encoder = MixedWidthEncoder(UniformCodec(8, torch.float16), kernels_for(device), layout)
    flat = encoder.encode(src, torch.arange(rows, device=device), counts, NoiseKey(1, 0, 1, "fwd", 0), "gpu check").wire
    out = encoder.decode(flat, 256)
    step = ((src.amax(1) - src.amin(1)) / (2.0 ** bits.to(device).float() - 1)).cpu()
    err = (out - src).abs().amax(1).cpu()
    return {
        "ok": bool((err <= step * 1.01 + 1e-3).all()),
        "backend": encoder.backend,
        "max_err_over_step": float((err / step).max()),
    }


def _one_step(strategy_name: str, quantizer: str, device: torch.device, world_size: int):
    """One forward/backward on this rank's part of a synthetic graph; logits and gradients on the CPU."""

    from gnnq.comm import Communicator, HaloExchange
    from gnnq.comm.codec import message_quantization
    from gnnq.config.typed import typed_config
    from gnnq.data.loaders.synthetic import generate_sbm
    from gnnq.data.part import build_parts
    from gnnq.data.partition import partition_nodes
    from gnnq.models import local_graph_for
    from gnnq.models.factory import build_model
    from gnnq.parallel import make_strategy
    from gnnq.train.full_graph import forward_backward

    quantizer_keys = {"name": quantizer, **({"bits": 8} if quantizer != "fp32" else {})}
    sampling_keys = {"sampling_rate": 1.0} if strategy_name == "sampling" else {}
    cfg = typed_config(
        {
            "model": {"name": "gcn", "layers": 3, "hidden": 64, "dropout": 0.0, "norm": "layer"},
            "quantizer": quantizer_keys,
            "parallel": {"name": strategy_name, **sampling_keys},
        }
    )
    comm = Communicator()
    graph = generate_sbm(5000, 10.0, 4, 32, 0.5, 3.0, seed=0)
    assignment = partition_nodes(graph.edge_index, graph.num_nodes, world_size, "metis", 0)
    part = build_parts(graph, assignment, world_size)[comm.rank].to(device)
    torch.manual_seed(0)
    model = build_model(cfg, part).to(device)
    exchange = HaloExchange(
        comm, part.send_idx, part.send_counts, part.halo_counts, message_quantization(cfg.quantizer, 0, comm.rank)
    )
    strategy = make_strategy(cfg.parallel, exchange, local_graph_for("gcn", part), part.x, seed=0)
    strategy.begin_training_epoch(1)
    logits, _ = forward_backward(model, part, strategy, float(graph.train_mask.sum()), comm)
    strategy.close()
    _sync(device)
    return logits.detach().cpu(), [p.grad.detach().cpu() for p in model.parameters()]


def _overlap_rank(rank: int, world_size: int, port: int, device_name: str, out_dir: str) -> None:
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world_size)  # both ranks share the one GPU
    try:
        device = torch.device(device_name)
        result = {q: {s: _one_step(s, q, device, world_size) for s in STRATEGIES_CHECKED} for q in ("fp32", "uniform")}
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


STRATEGIES_CHECKED = tuple(
    name for name in PARALLEL.names() if PARALLEL.choice(name).trainer == FULL_GRAPH_TRAINER
)  # the strategies


def check_overlap_equals_sync(device: torch.device, world_size: int = 2) -> dict:
    """Two ranks (gloo, CUDA tensors on the same device): overlap, stale and sampling against sync."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    worst = {"fp32": 0.0, "uniform": 0.0}
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_overlap_rank, args=(world_size, port, str(device), out_dir), nprocs=world_size, join=True)
        for rank in range(world_size):
            result = torch.load(os.path.join(out_dir, f"rank{rank}.pt"), weights_only=False)
            for quantizer, by_strategy in result.items():
                ref_logits, ref_grads = by_strategy["sync"]
                for name in STRATEGIES_CHECKED[1:]:
                    logits, grads = by_strategy[name]
                    for got, ref in [(logits, ref_logits), *zip(grads, ref_grads)]:
                        diff = float((got - ref).abs().max() / ref.abs().max().clamp(min=1e-12))
                        worst[quantizer] = max(worst[quantizer], diff)
    # With 8-bit messages a rounding-level difference upstream can flip a code, so only fp32 is held to 1e-5.
    return {
        "ok": worst["fp32"] <= 1e-5,
        "max_relative_difference": worst,
        "ranks": world_size,
        "strategies": list(STRATEGIES_CHECKED[1:]),
    }


def check_cli(device: torch.device) -> dict:
    runs = Path(tempfile.mkdtemp(prefix="gnnq-gpu-check-"))
    args = [
        "logger=none",
        "experiment=adaqp",
        "cluster.nproc=1",
        "dataset.num_nodes=20000",
        "trainer.epochs=6",
        "quantizer.assign_cycle=2",
        "model.hidden=128",
    ]
    env = {**os.environ, "GNNQ_RUNS": str(runs), "GNNQ_DATA": str(runs / "data")}
    if device.type != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    res = subprocess.run(
        [sys.executable, "-m", "gnnq.cli", *args], capture_output=True, text=True, env=env, timeout=900
    )
    records = [json.loads(p.read_text()) for p in runs.rglob("record.json")]
    if res.returncode != 0 or not records:
        return {"ok": False, "stderr": res.stderr[-2000:]}
    summary = records[0]["summary"]
    # CUDA: triton; CPU: the fused C codec, or torch where it cannot be built (gnnq.comm.kernels.backends.kernels_for)
    expected_backends = ("triton",) if device.type == "cuda" else ("c", "torch")
    return {
        "ok": records[0]["status"] == "ok" and summary.get("codec_backend") in expected_backends,
        "codec_backend": summary.get("codec_backend"),
        "device": summary.get("device"),
        "epoch_time_s": records[0]["epoch_time_s"],
        "peak_gpu_memory_mib_per_rank": summary.get("peak_gpu_memory_mib_per_rank"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.gpu.check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--rows", type=int, default=65536)
    p.add_argument("--dim", type=int, default=256)
    args = p.parse_args(argv)
    device = torch.device(args.device)
    checks = {
        "codec_identity": lambda: check_codec_identity(device),
        "codec_throughput": lambda: check_codec_throughput(device, args.rows, args.dim),
        "mixed_layout": lambda: check_mixed_layout(device),
        "overlap_equals_sync": lambda: check_overlap_equals_sync(device),
        "cli": lambda: check_cli(device),
    }
    results = {}
    for name, fn in checks.items():
        t0 = time.perf_counter()
        try:
            results[name] = fn()
        except Exception:
            results[name] = {"ok": False, "error": traceback.format_exc()[-2000:]}
        results[name]["seconds"] = round(time.perf_counter() - t0, 2)
        print(
            f"[gpu-check] {name}: {'ok' if results[name]['ok'] else 'FAILED'} ({results[name]['seconds']} s)",
            flush=True,
        )
    machine = describe_machine()
    if device.type == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(device)
    args.out.mkdir(parents=True, exist_ok=True)
    command = command_line("tests.gpu.check", argv)
    (args.out / "gpu_check.json").write_text(
        json.dumps({"command": command, "machine": machine, "checks": results}, indent=1)
    )
    lines = [
        "# GPU checks",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {json.dumps(machine)}",
        "",
        markdown_table(["check", "ok", "seconds"], [[k, v["ok"], v["seconds"]] for k, v in results.items()]),
        "",
    ]
    (args.out / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if all(v["ok"] for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
