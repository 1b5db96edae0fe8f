"""Quantized halo messages: wire bytes against fp32, CPU codec throughput, and accuracy by bit width.

    python -m gnnq.bench.quantized_messages --data DIR --out results/quantized_messages [--accuracy]

Bytes come from real gnnq runs (2 ranks, synthetic graph, hidden 256, input features cached).
Codec throughput is timed in this process beside a same-size fp32->fp16 conversion, interleaved
and repeated. ``--accuracy`` adds 4-rank Cora/CiteSeer runs (GCN and SAGE, 3 seeds per bit width).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from gnnq.bench.gnnq_runs import command_line, run_gnnq
from gnnq.bench.machine import describe_machine
from gnnq.comm.kernels import torch_codec
from gnnq.track.progress import markdown_table

BITS = (8, 4, 2, 1)
BYTE_TARGETS = {8: 3.9, 4: 7.7, 2: 15.0}
HIDDEN = 256
PARAM_BYTES = 4  # fp16 zero point + step


def wire_bytes(data: Path, runs: Path) -> list[dict]:
    common = ["logger=none", "cluster.nproc=2", f"model.hidden={HIDDEN}", "trainer.epochs=3", "trainer.eval_every=3"]
    fp32 = run_gnnq(common, data, runs / "fp32")[0]["comm_bytes_per_epoch"]
    rows = []
    for bits in BITS:
        q = run_gnnq([*common, "quantizer=uniform", f"quantizer.bits={bits}"], data, runs / f"b{bits}")[0]["comm_bytes_per_epoch"]
        limit = 4 * HIDDEN / (torch_codec.code_bytes(HIDDEN, bits) + PARAM_BYTES)
        rows.append({"bits": bits, "fp32_bytes": fp32, "bytes": q, "reduction": fp32 / q, "limit": limit,
                     "target": BYTE_TARGETS.get(bits)})  # fmt: skip
    return rows


def codec_throughput(rows: int, dim: int, repeats: int) -> list[dict]:
    x = torch.randn(rows, dim)
    noise = torch.rand_like(x)
    wires = {b: torch_codec.quantize_pack(x, noise, b, torch.float16) for b in BITS}
    cases = {"fp32->fp16 copy": lambda: x.to(torch.float16)}
    for b in BITS:
        cases[f"{b}-bit quantize+pack"] = lambda b=b: torch_codec.quantize_pack(x, noise, b, torch.float16)
        cases[f"{b}-bit unpack+dequantize"] = lambda b=b: torch_codec.unpack_dequantize(wires[b], dim, b, torch.float16)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["fp32->fp16 copy"])
    nbytes = x.numel() * 4
    return [{"op": k, "median_s": statistics.median(v), "gb_per_s": nbytes / statistics.median(v) / 1e9,
             "vs_fp16_copy": statistics.median(v) / base} for k, v in times.items()]  # fmt: skip


def accuracy(data: Path, runs: Path) -> list[dict]:
    rows = []
    for dataset in ("cora", "citeseer"):
        for model in ("gcn", "sage"):
            base = [f"dataset={dataset}", f"model={model}", "logger=none", "cluster.nproc=4", "model.layers=2",
                    "model.hidden=64", "model.norm=none", "trainer.weight_decay=0.0005", "trainer.epochs=150",
                    "dataset.download=false", "trainer.seed=0,1,2"]  # fmt: skip
            out = runs / f"acc-{dataset}-{model}"
            run_gnnq(["-m", *base], data, out / "fp32")
            run_gnnq(["-m", *base, "quantizer=uniform", "quantizer.bits=8,4,2,1"], data, out / "q")
            by_bits: dict[int, list[float]] = {}
            for p in out.rglob("record.json"):
                rec = json.loads(p.read_text())
                by_bits.setdefault(rec["config"]["quantizer"]["bits"], []).append(rec["test"])
            row = {"dataset": dataset, "model": model}
            row.update({str(b): statistics.mean(v) for b, v in sorted(by_bits.items(), reverse=True)})
            rows.append(row)
            print(f"[bench] accuracy {row}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, required=True, help="data root (Cora/CiteSeer raw files for --accuracy)")
    p.add_argument("--out", type=Path, default=Path("results/quantized_messages"))
    p.add_argument("--accuracy", action="store_true", help="also run the 4-rank Cora/CiteSeer accuracy sweep (~15 min)")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    command = command_line("gnnq.bench.quantized_messages", argv)
    runs = Path(tempfile.mkdtemp(prefix="gnnq-qbench-"))
    byte_rows = wire_bytes(args.data, runs)
    codec_rows = codec_throughput(65536, HIDDEN, args.repeats)
    acc_rows = accuracy(args.data, runs) if args.accuracy else []
    machine = describe_machine()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"command": command, "machine": machine, "wire_bytes": byte_rows,
                                                       "codec": codec_rows, "accuracy": acc_rows}, indent=1))  # fmt: skip
    md = [
        "# Quantized halo messages", "", f"Command: `{command}`", "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, torch {machine['torch']}, CUDA {'yes' if machine['cuda'] else 'no'}.",
        "", f"## Wire bytes per training epoch against fp32 (hidden {HIDDEN}, 2 ranks, fp16 parameters, inputs cached)", "",
        markdown_table(["bits", "fp32 bytes", "quantized bytes", "reduction", "limit", "target"],
                       [[r["bits"], f"{r['fp32_bytes']:,}", f"{r['bytes']:,}", f"{r['reduction']:.2f}x", f"{r['limit']:.2f}x",
                         f">= {r['target']}x" if r["target"] else "-"] for r in byte_rows]),
        "", f"## CPU codec throughput ({65536} x {HIDDEN} fp32 = 64 MiB input, median of {args.repeats}, interleaved)", "",
        markdown_table(["op", "ms", "GB/s of fp32 input", "time vs fp32->fp16 copy"],
                       [[r["op"], f"{r['median_s'] * 1000:.1f}", f"{r['gb_per_s']:.2f}", f"{r['vs_fp16_copy']:.1f}x"] for r in codec_rows]),
        "", "Target: quantize+pack within 3x of the copy. Draws (torch.rand) are generated beforehand and not timed.", "",
    ]  # fmt: skip
    if acc_rows:
        bits_cols = [k for k in acc_rows[0] if k not in ("dataset", "model")]
        md += ["## Test accuracy by bit width (4 ranks, METIS, mean of 3 seeds)", "",
               markdown_table(["dataset", "model"] + [f"{b}-bit" if b != "32" else "fp32" for b in bits_cols],
                              [[r["dataset"], r["model"]] + [f"{r[b]:.4f}" for b in bits_cols] for r in acc_rows]), ""]  # fmt: skip
    (args.out / "README.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
