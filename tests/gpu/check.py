"""One short script for every check that needs a GPU, to run when a session is lent one.

    python -m tests.gpu.check --out $OUT [--device cuda] [--sizes 16,64] [--only CHECK,...]

(``pytest tests/gpu`` runs the same checks as tests, skipped without CUDA.) Each check is timed; a check that
fails is recorded and the script goes on.

1. ``codec_identity``: the Triton codec on the device == the torch codec on the device == the torch codec on the
   CPU == the fused C codec on the CPU, bit for bit (encode and decode; 1/2/4/8 bits; fp16 and fp32 parameters;
   several shapes, a feature dim above the one-pass chunk among them), and mixed-width messages encoded by the
   Triton backend on the device == the C backend on the CPU (``MixedWidthEncoder``).
2. ``codec_bandwidth``: Triton quantize+pack and unpack against a same-size fp32->fp16 copy at 16M and 64M values
   (rows of 256), 2/4/8 bits: the effective bandwidth (bytes read + written per second) as a fraction of the copy's;
   target >= 0.8. A small sweep of the tiling (rows per program, warps; bytes checked equal) says what is left.
3. ``mixed_layout``: mixed-width layouts decode within one step per row on the device.
4. ``strategies_cuda_equal_cpu``: 2 ranks (gloo) sharing the device; for sync, overlap (split=columns and
   split=central), stale (warm-up sync and zeros), sampling (rate 1), sancus, and the parallel and model choices
   of the published presets (adaqp_published, adaqp_vanilla_published, pipegcn) with exact messages: three
   training steps (SGD) of the real trainer on CUDA and on the CPU give gradients equal to 1e-5 (relative to
   the largest); with 8-bit messages the difference is reported. CUDA-event accounting: for every message key,
   exposed time <= transfer time.
5. ``cli``: the real command line on the device: ``experiment=adaqp`` with NCCL (1 rank); ``adaqp_published``
   with gloo and 2 ranks sharing the GPU (``cluster.device=cuda``), traced; a 2-point multirun on the warm rank
   pool (gloo, cuda); and NCCL with 2 ranks on one GPU, which must fail with the line naming the fix.

Writes ``gpu_check.json`` and ``README.md`` under ``--out``; exits non-zero if a check fails.
``--device cpu`` runs the same script as a smoke test (Triton under TRITON_INTERPRET=1; ``--sizes 0.01`` for small
codec sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch

from benchmarks.gnnq_runs import command_line
from gnnq.bench.machine import describe_machine
from gnnq.comm.kernels import c_codec, torch_codec, triton_codec
from gnnq.comm.kernels.philox import RowStreams
from gnnq.track.progress import markdown_table

WIDTHS = (1, 2, 4, 8)
TARGET = 0.8  # the codec's effective bandwidth over the fp32->fp16 copy's


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time(fn, device: torch.device) -> float:
    """Median seconds of ``fn`` (CUDA events on the GPU; 20 repeats, 2 for the CPU smoke test)."""
    repeats = 20 if device.type == "cuda" else 2
    fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


# ---- 1. codec identity ---------------------------------------------------------------------------------------


def _identity_case(src, idx, streams, bits, pdt, device) -> list[str]:
    """What differs between the Triton (device), torch (device), torch (CPU) and C (CPU) codecs on one case."""
    dim = src.shape[1]
    cpu_streams = RowStreams(streams.keys.cpu(), streams.index.cpu())
    wires = {
        "triton": triton_codec.quantize_pack(src, idx, streams, bits, pdt)[0].cpu(),
        "torch@device": torch_codec.quantize_rows(src, idx, streams, bits, pdt)[0].cpu(),
        "torch@cpu": torch_codec.quantize_rows(src.cpu(), idx.cpu(), cpu_streams, bits, pdt)[0],
    }
    if c_codec.enabled():
        wires["c@cpu"] = c_codec.quantize_pack(src.cpu(), idx.cpu(), cpu_streams, bits, pdt)[0]
    ref = wires["torch@cpu"]
    decoded_ref = torch_codec.unpack_dequantize(ref, dim, bits, pdt).view(torch.int32)
    wire_dev = wires["triton"].to(device)
    decoded = {
        "triton": triton_codec.unpack_dequantize(wire_dev, dim, bits, pdt).cpu(),
        "torch@device": torch_codec.unpack_dequantize(wire_dev, dim, bits, pdt).cpu(),
    }
    if c_codec.enabled():
        decoded["c@cpu"] = c_codec.unpack_dequantize(ref, dim, bits, pdt)
    case = f"{idx.numel()}x{dim} {bits}-bit {pdt}"
    bad = [f"{case}: {name} encodes differently" for name, w in wires.items() if not torch.equal(w, ref)]
    bad += [
        f"{case}: {name} decodes differently"
        for name, d in decoded.items()
        if not torch.equal(d.view(torch.int32), decoded_ref)
    ]
    return bad


def check_codec_identity(device: torch.device) -> dict:
    from gnnq.comm.codec import NoiseKey, UniformCodec
    from gnnq.comm.encoder import MixedWidthEncoder
    from gnnq.comm.kernels.backends import BACKENDS
    from gnnq.comm.wire_layout import WireLayout

    gen = torch.Generator(device=device).manual_seed(0)
    mismatches, cases = [], 0
    for rows, dim in ((7, 5), (300, 256), (64, 602), (33, 3000)):
        src = torch.randn(rows * 2, dim, device=device, generator=gen) * 3
        src[0, 0] = -7e4  # fp16 parameters overflow: bfloat16 ones, flagged
        src[1] = 0.0
        src[2] *= 1e35
        idx = torch.cat([torch.arange(3, device=device), torch.randperm(rows * 2, device=device, generator=gen)[:rows]])
        streams = RowStreams.of_blocks([11, 2**40 + 3], [idx.numel() // 2, idx.numel() - idx.numel() // 2], device)
        for bits in WIDTHS:
            for pdt in (torch.float16, torch.float32):
                mismatches += _identity_case(src, idx, streams, bits, pdt, device)
                cases += 1
    # Mixed widths in one message: the Triton backend on the device against the C (or torch) backend on the CPU.
    counts = [400, 0, 900, 300]
    cpu_gen = torch.Generator().manual_seed(1)
    bits = torch.tensor(WIDTHS)[torch.randint(0, 4, (sum(counts),), generator=cpu_gen)]
    layout = WireLayout(bits, counts, bits, counts)
    src = torch.randn(sum(counts) + 50, 300, generator=cpu_gen)
    rows = torch.randperm(sum(counts) + 50, generator=cpu_gen)[: sum(counts)]
    key = NoiseKey(3, 1, 2, "bwd", 1)
    cpu_backend = BACKENDS["c"] if c_codec.enabled() else BACKENDS["torch"]
    cpu_enc = MixedWidthEncoder(UniformCodec(8, torch.float16), cpu_backend, layout)
    dev_enc = MixedWidthEncoder(UniformCodec(8, torch.float16), BACKENDS["triton"], layout)
    want = cpu_enc.encode(src, rows, counts, key, "gpu check").wire
    got = dev_enc.encode(src.to(device), rows.to(device), counts, key, "gpu check").wire
    if not torch.equal(got.cpu(), want):
        mismatches.append(f"mixed widths: the triton backend's message differs from the {cpu_backend.name} backend's")
    if not torch.equal(dev_enc.decode(got, 300).cpu().view(torch.int32), cpu_enc.decode(want, 300).view(torch.int32)):
        mismatches.append(f"mixed widths: the triton backend decodes differently from the {cpu_backend.name} backend")
    return {"ok": not mismatches, "cases": cases + 1, "c_codec": c_codec.enabled(), "mismatches": mismatches}


# ---- 2. codec bandwidth --------------------------------------------------------------------------------------


def _bandwidth_row(x, idx, streams, bits, device, copy_s, **tiling) -> dict:
    rows, dim = x.shape
    wire = triton_codec.quantize_pack(x, idx, streams, bits, torch.float16, **tiling)[0]
    enc_s = _time(lambda: triton_codec.quantize_pack(x, idx, streams, bits, torch.float16, **tiling), device)
    out = torch.empty_like(x)
    dec_s = _time(lambda: triton_codec.unpack_dequantize(wire, dim, bits, torch.float16, out=out, **tiling), device)
    copy_bytes = x.numel() * 6  # read fp32, write fp16
    codec_bytes = x.numel() * 4 + wire.numel()  # read fp32 (write wire) / read wire (write fp32)
    return {
        "encode_us": round(enc_s * 1e6, 1),
        "decode_us": round(dec_s * 1e6, 1),
        "encode_vs_copy": round((codec_bytes / enc_s) / (copy_bytes / copy_s), 3),
        "decode_vs_copy": round((codec_bytes / dec_s) / (copy_bytes / copy_s), 3),
        "wire": wire,
    }


def check_codec_bandwidth(device: torch.device, sizes_m: list[float], dim: int = 256) -> dict:
    table, sweep = [], []
    for size in sizes_m:
        rows = int(size * (1 << 20)) // dim
        x = torch.randn(rows, dim, device=device)
        idx = torch.arange(rows, device=device)
        streams = RowStreams.of_blocks([5, 6], [rows // 2, rows - rows // 2], device)
        copy_s = _time(lambda: x.to(torch.float16), device)
        for bits in (8, 4, 2):
            row = _bandwidth_row(x, idx, streams, bits, device, copy_s)
            row.pop("wire")
            gathered = _bandwidth_row(x, torch.randperm(rows, device=device), streams, bits, device, copy_s)
            table.append(
                {
                    "values_M": size,
                    "bits": bits,
                    "copy_us": round(copy_s * 1e6, 1),
                    **row,
                    "encode_gathered_us": gathered["encode_us"],
                }
            )
        if size == sizes_m[0]:  # the tiling sweep: does another tiling reach the target, with the same bytes?
            for bits in (8, 2):
                ref = triton_codec.quantize_pack(x, idx, streams, bits, torch.float16)[0]
                for per_program in (1, 4, 16):
                    for warps in (2, 4, 8):
                        r = _bandwidth_row(
                            x, idx, streams, bits, device, copy_s, rows_per_program=per_program, num_warps=warps
                        )
                        same = torch.equal(r.pop("wire"), ref)
                        sweep.append(
                            {"bits": bits, "rows_per_program": per_program, "num_warps": warps, **r, "same_bytes": same}
                        )
    worst = min(min(r["encode_vs_copy"], r["decode_vs_copy"]) for r in table)
    return {
        "ok": all(s["same_bytes"] for s in sweep),  # correctness; the target is reported, not a failure
        "target_met": worst >= TARGET,
        "worst_vs_copy": worst,
        "target": TARGET,
        "table": table,
        "tiling_sweep": sweep,
    }


# ---- 3. mixed layouts -------------------------------------------------------------------------------------------


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


# ---- 4. strategies: CUDA == CPU --------------------------------------------------------------------------------

# (name, overrides): the parallel and model choices of each strategy and published preset; exact messages unless
# the name says 8-bit. Dropout 0 and SGD, so that the two devices see the same computation.
STRATEGY_CASES = [
    ("sync", ["parallel=sync"]),
    ("overlap split=columns", ["parallel=overlap", "parallel.split=columns"]),
    ("overlap split=central", ["parallel=overlap", "parallel.split=central"]),
    ("stale warmup=sync", ["parallel=stale"]),
    ("stale warmup=zeros (pipegcn)", ["experiment=pipegcn"]),
    ("sampling rate=1", ["parallel=sampling", "parallel.sampling_rate=1.0"]),
    ("sancus", ["experiment=sancus"]),
    ("adaqp_published, exact", ["experiment=adaqp_published", "+exact=1"]),
    ("adaqp_vanilla_published", ["experiment=adaqp_vanilla_published"]),
    ("sync 8-bit", ["parallel=sync", "quantizer=uniform", "quantizer.bits=8"]),
    ("overlap split=central 8-bit", ["parallel=overlap", "parallel.split=central", "quantizer=uniform"]),
]
COMMON = [
    "dataset=synthetic",
    "dataset.num_nodes=3000",
    "model.dropout=0.0",
    "trainer.optimizer=sgd",
    "trainer.lr=0.1",
    "model.hidden=64",
    "logger=none",
]


def _case_config(overrides: list[str]):
    from omegaconf import OmegaConf

    from gnnq.config.compose import compose_config
    from gnnq.config.typed import typed_config

    exact = "+exact=1" in overrides  # the preset's parallel and model choices, its messages in fp32
    cfg = compose_config([o for o in overrides if o != "+exact=1"] + COMMON)
    plain = OmegaConf.to_container(cfg, resolve=True)
    if exact:
        plain["quantizer"] = {"name": "fp32"}
    return typed_config(plain)


def _train_grads(cfg, part, device, comm, steps: int = 3):
    """Gradients (on the CPU) after each of ``steps`` training steps of the real full-graph trainer on ``device``."""
    from gnnq.train.full_graph import FullGraphTrainer

    trainer = FullGraphTrainer(cfg, part, comm, device)
    grads = []
    for epoch in range(1, steps + 1):
        trainer.before_epoch(epoch)
        trainer.train_step(epoch)
        trainer.settle_training()
        grads.append([p.grad.detach().cpu().clone() for p in trainer.model.parameters()])
    trainer.strategy.close()
    _sync(device)
    return grads


def _strategies_rank(rank: int, world: int, port: int, device_name: str, out_dir: str) -> None:
    import torch.distributed as dist

    from gnnq.comm import Communicator
    from gnnq.data.loaders.synthetic import generate_sbm
    from gnnq.data.part import build_parts
    from gnnq.data.partition import partition_nodes

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)  # both ranks share the one GPU
    try:
        graph = generate_sbm(3000, 10.0, 4, 32, 0.5, 3.0, seed=0)
        assignment = partition_nodes(graph.edge_index, graph.num_nodes, world, "metis", 0)
        part = build_parts(graph, assignment, world)[rank]
        result = {}
        for name, overrides in STRATEGY_CASES:
            cfg = _case_config(overrides)
            by_device, timing = {}, []
            for dev in ("cpu", device_name):
                comm = Communicator()
                by_device[dev] = _train_grads(cfg, part, torch.device(dev), comm)
                if dev != "cpu":
                    comm.stats.resolve()
                    timing = [
                        (str(k), comm.stats.seconds[k], comm.stats.transfer.get(k, 0.0))
                        for k in comm.stats.seconds
                        if k in comm.stats.transfer
                    ]
            result[name] = {"grads": by_device, "timing": timing}
        torch.save(result, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def check_strategies_cuda_equal_cpu(device: torch.device, world: int = 2) -> dict:
    import torch.multiprocessing as mp

    diffs, exposure_violations = {}, []
    with tempfile.TemporaryDirectory() as out_dir:
        mp.spawn(_strategies_rank, args=(world, _free_port(), str(device), out_dir), nprocs=world, join=True)
        for rank in range(world):
            result = torch.load(os.path.join(out_dir, f"rank{rank}.pt"), weights_only=False)
            for name, case in result.items():
                cpu, dev = case["grads"]["cpu"], case["grads"][str(device)]
                worst = 0.0
                for step_cpu, step_dev in zip(cpu, dev):
                    for a, b in zip(step_cpu, step_dev):
                        worst = max(worst, float((a - b).abs().max() / a.abs().max().clamp(min=1e-12)))
                diffs[name] = max(diffs.get(name, 0.0), worst)
                for key, exposed, transfer in case["timing"]:
                    if exposed > transfer * 1.001 + 1e-5:
                        exposure_violations.append(
                            f"rank {rank} {name} {key}: exposed {exposed:.6f} s > transfer {transfer:.6f} s"
                        )
    exact = {k: v for k, v in diffs.items() if "8-bit" not in k}
    return {
        "ok": all(v <= 1e-5 for v in exact.values()) and not exposure_violations,
        "max_relative_difference": diffs,
        "exposed_above_transfer": exposure_violations,
        "ranks": world,
    }


# ---- 5. the command line on the device -------------------------------------------------------------------------


def _gnnq(args: list[str], runs: Path, device: torch.device, multirun: bool = False) -> dict:
    env = {**os.environ, "GNNQ_RUNS": str(runs), "GNNQ_DATA": str(runs.parent / "data"), "WANDB_MODE": "offline"}
    if device.type != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    t0 = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "gnnq.cli", *(["-m"] if multirun else []), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )
    records = [json.loads(p.read_text()) for p in sorted(runs.rglob("record.json"))]
    return {
        "rc": res.returncode,
        "records": records,
        "stderr": res.stderr[-1500:],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def _run_row(out: dict) -> dict:
    rows = []
    for record in out["records"]:
        summary = record.get("summary", {})
        rows.append(
            {
                "status": record.get("status"),
                "error": record.get("error"),
                "codec_backend": summary.get("codec_backend"),
                "device": summary.get("device"),
                "epoch_time_s": record.get("epoch_time_s"),
                "test": record.get("test"),
                "comm_bytes_per_epoch": record.get("comm_bytes_per_epoch"),
                "peak_gpu_memory_mib_per_rank": summary.get("peak_gpu_memory_mib_per_rank"),
            }
        )
    return {
        "rc": out["rc"],
        "seconds": out["seconds"],
        "runs": rows,
        **({"stderr": out["stderr"]} if out["rc"] else {}),
    }


def check_cli(device: torch.device) -> dict:
    base = Path(tempfile.mkdtemp(prefix="gnnq-gpu-check-"))
    small = ["logger=none", "dataset.num_nodes=20000", "trainer.epochs=6", "model.hidden=128"]
    cuda = device.type == "cuda"
    results = {}
    results["adaqp nccl 1 rank"] = _run_row(
        _gnnq(
            [
                *small,
                "experiment=adaqp",
                "quantizer.assign_cycle=2",
                "cluster.nproc=1",
                f"cluster.backend={'nccl' if cuda else 'gloo'}",
            ],
            base / "a",
            device,
        )
    )
    results["adaqp_published gloo 2 ranks on one GPU, traced"] = _run_row(
        _gnnq(
            [
                *small,
                "experiment=adaqp_published",
                "quantizer.assign_cycle=2",
                "cluster.nproc=2",
                "cluster.backend=gloo",
                f"cluster.device={device.type}",
                "trainer.trace=true",
            ],
            base / "b",
            device,
        )
    )
    results["warm multirun gloo cuda: sync, overlap"] = _run_row(
        _gnnq(
            [
                *small,
                "parallel=sync,overlap",
                "cluster.nproc=2",
                "cluster.backend=gloo",
                f"cluster.device={device.type}",
            ],
            base / "c",
            device,
            multirun=True,
        )
    )
    ok = all(r["rc"] == 0 and r["runs"] and all(x["status"] == "ok" for x in r["runs"]) for r in results.values())
    backends = ("triton",) if cuda else ("c", "torch")
    ok = ok and results["adaqp nccl 1 rank"]["runs"][0]["codec_backend"] in backends
    if cuda:  # two NCCL ranks on one GPU: refused with the line naming the fix
        refused = _run_row(_gnnq([*small, "cluster.nproc=2", "cluster.backend=nccl"], base / "d", device))
        results["nccl 2 ranks on one GPU (must fail, naming the fix)"] = refused
        errors = " ".join(str(x.get("error")) for x in refused["runs"]) + refused.get("stderr", "")
        ok = ok and refused["rc"] != 0 and "cluster.device=cuda" in errors
    traces = list((base / "b").rglob("trace*"))
    results["trace files"] = len(traces)
    return {"ok": ok and bool(traces), **results}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.gpu.check", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--sizes", default="16,64", help="codec sizes, millions of values (2^20)")
    p.add_argument("--only", default="", help="comma-separated checks to run (default: all)")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    checks = {
        "codec_identity": lambda: check_codec_identity(device),
        "codec_bandwidth": lambda: check_codec_bandwidth(device, [float(s) for s in args.sizes.split(",")]),
        "mixed_layout": lambda: check_mixed_layout(device),
        "strategies_cuda_equal_cpu": lambda: check_strategies_cuda_equal_cpu(device),
        "cli": lambda: check_cli(device),
    }
    only = [c for c in args.only.split(",") if c]
    results = {}
    args.out.mkdir(parents=True, exist_ok=True)
    machine = describe_machine()
    if device.type == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(device)
    command = command_line("tests.gpu.check", argv)
    for name, fn in checks.items():
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        try:
            results[name] = fn()
        except Exception:
            results[name] = {"ok": False, "error": traceback.format_exc()[-3000:]}
        results[name]["seconds"] = round(time.perf_counter() - t0, 2)
        print(
            f"[gpu-check] {name}: {'ok' if results[name]['ok'] else 'FAILED'} ({results[name]['seconds']} s)",
            flush=True,
        )
        (args.out / "gpu_check.json").write_text(  # after every check: a later crash keeps what ran
            json.dumps({"command": command, "machine": machine, "checks": results}, indent=1, default=str)
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
    bandwidth = results.get("codec_bandwidth", {})
    if "table" in bandwidth:
        keys = [
            "values_M",
            "bits",
            "copy_us",
            "encode_us",
            "decode_us",
            "encode_vs_copy",
            "decode_vs_copy",
            "encode_gathered_us",
        ]
        lines += [
            "## Codec bandwidth against an fp32->fp16 copy",
            "",
            markdown_table(keys, [[r[k] for k in keys] for r in bandwidth["table"]]),
            "",
        ]
    (args.out / "README.md").write_text("\n".join(lines))
    print("\n".join(lines))
    return 0 if all(v["ok"] for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
