"""Quantized halo messages: wire bytes against fp32, CPU codec throughput, and accuracy by bit width.

    python -m benchmarks.quantized_messages --data DIR --out results/quantized_messages [--accuracy] [--codec-only]

Bytes come from real gnnq runs (2 ranks, synthetic graph, hidden 256, input features cached).
Codec throughput (the torch codec and the fused C codec, uniform and mixed-width messages) is
timed in this process beside a same-size fp32->fp16 conversion (fresh, and into an existing
buffer), interleaved and repeated. Encodes are timed as the exchange runs them: the encoder's
``encode`` with the message's ``NoiseKey``, so the Philox draws (computed inside the kernels) are
included.
``--accuracy`` adds 4-rank Cora/CiteSeer runs (GCN and SAGE, 3 seeds per bit width).
``--codec-only`` times the codecs only and keeps the other sections of the existing results.json.
``--before-source FILE`` adds the encoder before/after table: FILE is an earlier cpu_codec.c (e.g.
``git show main:gnnq/comm/kernels/cpu_codec.c > /tmp/codec-before.c``), built beside the current one and
timed against it, interleaved, on 65,536 x 256 and 16,384 x 1,024 inputs (16M elements each; the 256-wide rows
also gathered in a random order, as the exchange gathers boundary rows), with the current encoder at 1 and 2
threads and on each SIMD path.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.gnnq_runs import command_line, run_gnnq
from gnnq.bench.machine import describe_machine
from gnnq.comm.codec import NoiseKey, UniformCodec
from gnnq.comm.encoder import MixedWidthEncoder, UniformEncoder
from gnnq.comm.kernels import c_codec, torch_codec
from gnnq.comm.kernels.backends import kernels_named
from gnnq.comm.kernels.philox import ROUNDS
from gnnq.comm.wire_layout import WireLayout
from gnnq.track.progress import markdown_table

BITS = (8, 4, 2, 1)
BYTE_TARGETS = {8: 3.9, 4: 7.7, 2: 15.0}
HIDDEN = 256
PARAM_BYTES = 4  # fp16 zero point + step
MIXED_WIDTHS = (2, 4, 8)
# The decode as the exchange ran it before (fresh rows, then copied into [inner; halo] by torch.cat) and as it runs now.
BEFORE = "decode into a fresh tensor + copy into the halo buffer (before)"
INTO = "decode into the reused halo buffer (the exchange now)"


def wire_bytes(data: Path, runs: Path) -> list[dict]:
    common = ["logger=none", "cluster.nproc=2", f"model.hidden={HIDDEN}", "trainer.epochs=3", "trainer.eval_every=3"]
    fp32 = run_gnnq(common, data, runs / "fp32")[0]["comm_bytes_per_epoch"]
    rows = []
    for bits in BITS:
        q = run_gnnq([*common, "quantizer=uniform", f"quantizer.bits={bits}"], data, runs / f"b{bits}")[0][
            "comm_bytes_per_epoch"
        ]
        limit = 4 * HIDDEN / (torch_codec.code_bytes(HIDDEN, bits) + PARAM_BYTES)
        rows.append(
            {
                "bits": bits,
                "fp32_bytes": fp32,
                "bytes": q,
                "reduction": fp32 / q,
                "limit": limit,
                "target": BYTE_TARGETS.get(bits),
            }
        )
    return rows


def codec_throughput(rows: int, dim: int, repeats: int, mixed_widths=MIXED_WIDTHS, peers: int = 4) -> list[dict]:
    """Median times of each codec op beside the fp32->fp16 copy of the same input, all interleaved."""
    if not c_codec.enabled():
        raise RuntimeError("the C codec is not available here (see the warning above)")
    x = torch.randn(rows, dim)
    idx = torch.arange(rows)
    full = torch.empty(2 * rows, dim)  # a reused [inner; halo] buffer, as the exchange keeps per layer
    halo = full[rows:]
    half = torch.empty(rows, dim, dtype=torch.float16)
    counts = [rows // peers] * (peers - 1) + [rows - rows // peers * (peers - 1)]
    key = NoiseKey(0, 1, 1, "fwd", 0)
    cases = {
        "fp32->fp16 copy": lambda: x.to(torch.float16),
        "fp32->fp16 copy into an existing buffer": lambda: half.copy_(x),
        "fresh fp32 output, first touch": lambda: torch.empty_like(x).fill_(0.0),  # what every decode pays to allocate
    }
    for b in BITS:
        codec = UniformCodec(b, torch.float16)
        wire = UniformEncoder(codec, kernels_named("c")).encode(x, idx, counts, key, "bench").wire.view(rows, -1)
        for mode, label in (("torch", "torch"), ("c", "C")):
            enc = UniformEncoder(codec, kernels_named(mode))
            cases[f"{b}-bit encode with draws, {label}"] = lambda enc=enc: enc.encode(x, idx, counts, key, "bench")
        cases[f"{b}-bit unpack+dequantize, torch"] = lambda b=b, w=wire: torch_codec.unpack_dequantize(
            w, dim, b, torch.float16
        )
        cases[f"{b}-bit unpack+dequantize, C"] = lambda b=b, w=wire: c_codec.unpack_dequantize(w, dim, b, torch.float16)
        dec = UniformEncoder(codec, kernels_named("c"))
        cases[f"{b}-bit {BEFORE}, C"] = lambda dec=dec, w=wire: halo.copy_(dec.decode(w, dim))
        cases[f"{b}-bit {INTO}, C"] = lambda dec=dec, w=wire: dec.decode(w, dim, out=halo)
    # A 3-width adaptive message: rows spread over the widths at random, split among peers.
    gen = torch.Generator().manual_seed(0)
    bits = torch.tensor(mixed_widths)[torch.randint(0, len(mixed_widths), (rows,), generator=gen)]
    layout, codec = WireLayout(bits, counts, bits, counts), UniformCodec(8, torch.float16)
    flat = MixedWidthEncoder(codec, kernels_named("c"), layout).encode(x, idx, counts, key, "bench").wire
    name = "/".join(map(str, mixed_widths))
    for mode, label in (("torch", "torch"), ("c", "C")):
        enc = MixedWidthEncoder(codec, kernels_named(mode), layout)
        cases[f"{name}-bit mixed encode with draws, {label}"] = lambda enc=enc: enc.encode(x, idx, counts, key, "bench")
        cases[f"{name}-bit mixed decode, {label}"] = lambda enc=enc: enc.decode(flat, dim)
    mixed_c = MixedWidthEncoder(codec, kernels_named("c"), layout)
    cases[f"{name}-bit mixed {INTO}, C"] = lambda: mixed_c.decode(flat, dim, out=halo)
    for fn in cases.values():  # warm-up: builds the C library, touches the allocator
        fn()
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    base, buffered, nbytes = med["fp32->fp16 copy"], med["fp32->fp16 copy into an existing buffer"], x.numel() * 4
    rows_out = []
    for k, t in med.items():
        twin = k[: -len(", C")] + ", torch" if k.endswith(", C") else None
        rows_out.append(
            {
                "op": k,
                "median_s": t,
                "gb_per_s": nbytes / t / 1e9,
                "vs_fp16_copy": t / base,
                "vs_fp16_copy_into_buffer": t / buffered,
                "speedup_vs_torch": med[twin] / t if twin in med else None,
            }
        )
    return rows_out


# (rows, columns, gathered): rows in order, or gathered in a random order as the exchange gathers its boundary rows.
ENCODE_SHAPES = ((65536, 256, False), (16384, 1024, False), (65536, 256, True))


def _before_encoder(source: Path):
    """An earlier cpu_codec.c's encode (its gnnq_encode signature: no path or thread arguments), allocating its
    wire rows as ``c_codec.quantize_pack`` does. Headers it includes (cpu_codec_simd.h) are taken from its folder."""
    headers = [source.with_name(h.name) for h in c_codec.HEADERS]
    lib = ctypes.CDLL(str(c_codec.build(source, headers, "cpu_codec_before")))
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.gnnq_encode.argtypes = [ptr, i64, ptr, ptr, ptr, i64, ptr, ptr, ctypes.c_int, ctypes.c_int, ptr]
    lib.gnnq_encode.restype = i64

    def encode(x, idx, streams, bits, mixed=None):
        rows, dim = idx.numel(), x.shape[1]
        if mixed is None:
            out = torch.empty((rows, torch_codec.row_bytes(dim, bits, torch.float16)), dtype=torch.uint8)
            widths = offsets = None
        else:
            widths, offsets, total = mixed
            out = torch.empty(total, dtype=torch.uint8)
        lib.gnnq_encode(
            x.data_ptr(),
            dim,
            idx.data_ptr(),
            streams.keys.data_ptr(),
            streams.index.data_ptr(),
            rows,
            None if widths is None else widths.data_ptr(),
            None if offsets is None else offsets.data_ptr(),
            bits,
            1,
            out.data_ptr(),
        )
        return out

    return encode


def encode_before_after(before: Path, repeats: int) -> list[dict]:
    """Median wall and CPU (process) times of the earlier and the current C encoder beside the fp32->fp16 copy
    into an existing buffer, interleaved; 4 peers, fp16 parameters, rows in order or gathered (ENCODE_SHAPES)."""
    old = _before_encoder(before)
    out = []
    for rows, dim, gathered in ENCODE_SHAPES:
        x = torch.randn(rows, dim)
        idx = torch.randperm(rows, generator=torch.Generator().manual_seed(1)) if gathered else torch.arange(rows)
        half = torch.empty(rows, dim, dtype=torch.float16)
        streams = NoiseKey(0, 1, 1, "fwd", 0).streams([rows // 4] * 4, "cpu")
        gen = torch.Generator().manual_seed(0)
        widths = torch.tensor(MIXED_WIDTHS, dtype=torch.int8)[torch.randint(0, 3, (rows,), generator=gen)]
        sizes = torch.tensor([torch_codec.row_bytes(dim, int(b), torch.float16) for b in MIXED_WIDTHS])[
            torch.bucketize(widths.long(), torch.tensor(MIXED_WIDTHS))
        ]
        offsets = torch.cumsum(sizes, 0) - sizes
        mixed = (widths, offsets, int(sizes.sum()))
        cases = {"copy": lambda: half.copy_(x)}
        paths = c_codec.simd_paths()
        for b in (*BITS, "mixed"):
            m = mixed if b == "mixed" else None
            bb = 0 if m else b

            def new(threads=1, simd=None, b=b, m=m):
                if m:
                    return c_codec.encode_mixed(x, idx, streams, *m, torch.float16, simd=simd, threads=threads)
                return c_codec.quantize_pack(x, idx, streams, b, torch.float16, simd=simd, threads=threads)

            cases[(b, "before")] = lambda bb=bb, m=m: old(x, idx, streams, bb, m)
            cases[(b, "after")] = new
            cases[(b, "after, 2 threads")] = lambda new=new: new(threads=2)
            for p in paths:
                if p != paths[-1] and b in (8, "mixed"):
                    cases[(b, f"after, {p} path")] = lambda new=new, p=p: new(simd=p)
        for fn in cases.values():
            fn()
        wall = {k: [] for k in cases}
        cpu = {k: [] for k in cases}
        for _ in range(repeats):
            for k, fn in cases.items():
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                wall[k].append(time.perf_counter() - t0)
                cpu[k].append(time.process_time() - c0)
        copy_w, copy_c = statistics.median(wall["copy"]), statistics.median(cpu["copy"])
        for k in cases:
            if k == "copy":
                continue
            w, c = statistics.median(wall[k]), statistics.median(cpu[k])
            out.append(
                {
                    "shape": f"{rows}x{dim}" + (" gathered" if gathered else ""),
                    "bits": "/".join(map(str, MIXED_WIDTHS)) if k[0] == "mixed" else k[0],
                    "encoder": k[1],
                    "median_s": w,
                    "cpu_s": c,
                    "copy_s": copy_w,
                    "copy_cpu_s": copy_c,
                    "vs_copy": w / copy_w,
                    "cpu_vs_copy_cpu": c / copy_c,
                    "speedup": statistics.median(wall[(k[0], "before")]) / w,
                }
            )
            print(f"[bench] {out[-1]}", flush=True)
    return out


def accuracy(data: Path, runs: Path) -> list[dict]:
    rows = []
    for dataset in ("cora", "citeseer"):
        for model in ("gcn", "sage"):
            base = [
                f"dataset={dataset}",
                f"model={model}",
                "logger=none",
                "cluster.nproc=4",
                "model.layers=2",
                "model.hidden=64",
                "model.norm=none",
                "trainer.weight_decay=0.0005",
                "trainer.epochs=150",
                "dataset.download=false",
                "trainer.seed=0,1,2",
            ]
            out = runs / f"acc-{dataset}-{model}"
            run_gnnq(["-m", *base], data, out / "fp32")
            run_gnnq(["-m", *base, "quantizer=uniform", "quantizer.bits=8,4,2,1"], data, out / "q")
            by_bits: dict[int, list[float]] = {}
            for p in out.rglob("record.json"):
                rec = json.loads(p.read_text())
                by_bits.setdefault(rec["config"]["quantizer"].get("bits", 32), []).append(rec["test"])
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
    p.add_argument(
        "--codec-only", action="store_true", help="time the codecs only; keep the other sections of results.json"
    )
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--before-source", type=Path, help="an earlier cpu_codec.c: adds the encoder before/after table")
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads for the codec timings (torchrun gives each rank 1)"
    )
    args = p.parse_args(argv)
    command = command_line("benchmarks.quantized_messages", argv)
    runs = Path(tempfile.mkdtemp(prefix="gnnq-qbench-"))
    old = json.loads((args.out / "results.json").read_text()) if (args.out / "results.json").exists() else {}
    sections = old.get("sections", {"wire_bytes": old.get("command"), "accuracy": old.get("command")})
    if args.codec_only:
        byte_rows, acc_rows = old.get("wire_bytes", []), old.get("accuracy", [])
    else:
        byte_rows = wire_bytes(args.data, runs)
        acc_rows = accuracy(args.data, runs) if args.accuracy else []
        sections = {"wire_bytes": command, "accuracy": command if args.accuracy else None}
    sections["codec"] = command
    torch.set_num_threads(args.threads)
    load = [os.getloadavg()[0]]  # the machine may be shared: its 1-minute load average at the start and the end
    before_rows = encode_before_after(args.before_source, args.repeats) if args.before_source else []
    codec_rows = codec_throughput(65536, HIDDEN, args.repeats)
    load.append(os.getloadavg()[0])
    machine = describe_machine()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(
        json.dumps(
            {
                "command": command,
                "sections": sections,
                "machine": machine,
                "torch_threads": torch.get_num_threads(),
                "load_average": load,
                "wire_bytes": byte_rows,
                "codec": codec_rows,
                "encode_before_after": before_rows,
                "simd_paths": c_codec.simd_paths(),
                "accuracy": acc_rows,
            },
            indent=1,
        )
    )
    encode = [r["vs_fp16_copy_into_buffer"] for r in codec_rows if "encode with draws, C" in r["op"]]
    decode = [r["vs_fp16_copy_into_buffer"] for r in codec_rows if r["op"].endswith(f"{INTO}, C")]
    md = [
        "# Quantized halo messages",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine['cpu']}, {machine['cores']} cores, torch {machine['torch']} (torch threads: "
        f"{torch.get_num_threads()}), "
        f"CUDA {'yes' if machine['cuda'] else 'no'}. Load average (1 minute) at the start and the end of the codec "
        f"timings: {load[0]:.1f} / {load[1]:.1f} on {machine['cores']} cores (a shared machine: read the CPU-time "
        "ratios).",
        "",
    ]
    if args.codec_only:
        md += [
            f"Only the codec section was rerun; wire bytes come from `{sections['wire_bytes']}` and accuracy "
            f"from `{sections['accuracy']}`.",
            "",
        ]
    md += [
        f"## Wire bytes per training epoch against fp32 (hidden {HIDDEN}, 2 ranks, fp16 parameters, inputs cached)",
        "",
        markdown_table(
            ["bits", "fp32 bytes", "quantized bytes", "reduction", "limit", "target"],
            [
                [
                    r["bits"],
                    f"{r['fp32_bytes']:,}",
                    f"{r['bytes']:,}",
                    f"{r['reduction']:.2f}x",
                    f"{r['limit']:.2f}x",
                    f">= {r['target']}x" if r["target"] else "-",
                ]
                for r in byte_rows
            ],
        ),
        "",
        f"## CPU codec throughput ({65536} x {HIDDEN} fp32 = 64 MiB input, median of {args.repeats}, interleaved)",
        "",
        markdown_table(
            ["op", "ms", "GB/s of fp32 input", "vs fp32->fp16 copy", "vs copy into a buffer", "C speedup over torch"],
            [
                [
                    r["op"],
                    f"{r['median_s'] * 1000:.1f}",
                    f"{r['gb_per_s']:.2f}",
                    f"{r['vs_fp16_copy']:.1f}x",
                    f"{r['vs_fp16_copy_into_buffer']:.1f}x",
                    f"{r['speedup_vs_torch']:.1f}x" if r["speedup_vs_torch"] else "-",
                ]
                for r in codec_rows
            ],
        ),
        "",
        "Target: C encode with draws within 1.5x of the copy into an existing buffer: "
        f"{min(encode):.1f}-{max(encode):.1f}x "
        f"({'met' if max(encode) <= 1.5 else 'missed'}). Encodes run as the exchange runs them (the encoder with "
        "the message's "
        f"noise key, 4 peers): the Philox4x32-{ROUNDS} draws are computed inside the kernel (the torch rows compute "
        "them with vectorized torch ops) and included. The C codec ran on 1 thread (its default); torch ops used "
        f"{torch.get_num_threads()} torch thread(s). "
        "Target: C decode into the reused halo buffer within 1.0x of the copy into an existing buffer: "
        f"{min(decode):.1f}-"
        f"{max(decode):.1f}x ({'met' if max(decode) <= 1.0 else 'missed'}). The exchange decodes each message straight "
        "into the halo rows of a [inner; halo] buffer it keeps per layer (the rows `...(the exchange now)`); "
        "before, it "
        "decoded into a fresh tensor and torch.cat copied it into a fresh [inner; halo] (the rows `...(before)` "
        "time the "
        "halo part of that: the fresh decode and its copy; a fresh 64 MiB output also pays its first touch "
        "whenever the "
        "allocator hands back new pages, see `fresh fp32 output, first touch`). "
        f"Mixed rows: {'/'.join(map(str, MIXED_WIDTHS))} bits at random over 4 peers, fp16 parameters, "
        "one flat buffer per message.",
        "",
    ]
    if before_rows:
        after = [r["vs_copy"] for r in before_rows if r["encoder"] == "after"]
        after_cpu = [r["cpu_vs_copy_cpu"] for r in before_rows if r["encoder"] == "after"]
        md += [
            "## C encode with draws, before and after (fp16 parameters, 4 peers; median of "
            f"{args.repeats}, interleaved)",
            "",
            f"Before: `{args.before_source}` (an earlier cpu_codec.c, built beside this one: its widest path, "
            f"1 thread). After: this tree's encoder (Philox4x32-{ROUNDS}, the widest SIMD path here: "
            f"{c_codec.simd_paths()[-1]}; paths built: {', '.join(c_codec.simd_paths())}). `vs copy`: wall time "
            "over the fp32->fp16 copy into an existing buffer of the same input; `CPU vs copy`: process CPU time "
            "over the copy's (less disturbed by other processes on a shared machine). How the encoder works and "
            "what these numbers say: [encoder_simd.md](encoder_simd.md).",
            "",
            markdown_table(
                ["input", "bits", "encoder", "ms", "vs copy", "CPU ms", "CPU vs copy", "speedup over before"],
                [
                    [
                        r["shape"],
                        r["bits"],
                        r["encoder"],
                        f"{r['median_s'] * 1000:.1f}",
                        f"{r['vs_copy']:.2f}x",
                        f"{r['cpu_s'] * 1000:.1f}",
                        f"{r['cpu_vs_copy_cpu']:.2f}x",
                        f"{r['speedup']:.2f}x",
                    ]
                    for r in before_rows
                ],
            ),
            "",
            f"Target: C encode with draws <= 1.5x the copy into an existing buffer, every width and input: "
            f"wall {min(after):.2f}-{max(after):.2f}x ({'met' if max(after) <= 1.5 else 'missed'}), CPU time "
            f"{min(after_cpu):.2f}-{max(after_cpu):.2f}x ({'met' if max(after_cpu) <= 1.5 else 'missed'}).",
            "",
        ]
    if acc_rows:
        bits_cols = [k for k in acc_rows[0] if k not in ("dataset", "model")]
        md += [
            "## Test accuracy by bit width (4 ranks, METIS, mean of 3 seeds)",
            "",
            markdown_table(
                ["dataset", "model"] + [f"{b}-bit" if b != "32" else "fp32" for b in bits_cols],
                [[r["dataset"], r["model"]] + [f"{r[b]:.4f}" for b in bits_cols] for r in acc_rows],
            ),
            "",
        ]
    (args.out / "README.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
