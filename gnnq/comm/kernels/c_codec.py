"""The fused CPU codec: cpu_codec.c, compiled on first use with the system C compiler, called through ctypes.

Outputs are bit-identical to torch_codec (the C code does the same IEEE fp32 operations in the
same order; it is built without -ffast-math and with FMA contraction off). The shared library
is cached under ``$GNNQ_KERNEL_CACHE`` (default ``~/.cache/gnnq/kernels``) in a folder named by
a hash of the sources, compiler, flags and this CPU's instruction sets, and renamed into place so
concurrent ranks don't race.

Build flags are chosen per CPU when the cached library is built: the encoder's SIMD variants
(AVX2, AVX-512: cpu_codec_simd.h) are compiled in only where the CPU has them (and dropped, widest
first, if the compiler rejects them); at run time the widest one the CPU supports is taken (the scalar
path on CPUs with neither: there the generic vectors were slower), unless
``GNNQ_CODEC_SIMD=scalar|generic|avx2|avx512`` (or ``simd=``) forces one. ``scalar`` is the
reference the others equal bit for bit. ``GNNQ_CODEC_THREADS`` (default 1: the exchange runs beside
the compute) splits an encode's rows over threads.
``GNNQ_CPU_CODEC=torch|c`` forces a path; without a working compiler the torch codec is used
after a one-line warning. ``CC`` names the compiler (default: Python's own, then cc, gcc).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import warnings
from pathlib import Path

import torch

from gnnq.comm.kernels import torch_codec
from gnnq.comm.kernels.philox import RowStreams

SOURCE = Path(__file__).with_name("cpu_codec.c")
HEADERS = [Path(__file__).with_name("cpu_codec_simd.h")]
FLAGS = ["-O3", "-std=c99", "-shared", "-fPIC", "-pthread", "-ffp-contract=off", "-fno-fast-math", "-Wno-psabi"]
SIMD = {"auto": 0, "scalar": 1, "generic": 2, "avx2": 3, "avx512": 4}
# The SIMD variants a CPU can have compiled in: the /proc/cpuinfo flags each needs, and its -D flag.
VARIANTS = {
    "avx512": ({"avx512f", "avx512bw", "avx512dq", "avx512vl", "f16c"}, "-DGNNQ_AVX512"),
    "avx2": ({"avx2", "f16c"}, "-DGNNQ_AVX2"),
}

_lib: ctypes.CDLL | None = None
_failed = False


def compiler() -> list[str] | None:
    """The compiler command: ``$CC`` if set (and only it), else Python's CC, cc or gcc, if installed."""
    if os.environ.get("CC"):
        candidates = [os.environ["CC"]]
    else:
        candidates = [c for c in (sysconfig.get_config_var("CC"), "cc", "gcc") if c]
    for cand in candidates:
        cmd = shlex.split(cand)
        if cmd and shutil.which(cmd[0]):
            return cmd
    return None


def cache_root() -> Path:
    if os.environ.get("GNNQ_KERNEL_CACHE"):
        return Path(os.environ["GNNQ_KERNEL_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gnnq" / "kernels"


def cpu_flags() -> set[str]:
    """This CPU's instruction-set flags (Linux /proc/cpuinfo; empty elsewhere: then only the portable paths)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def variant_flags(flags: set[str] | None = None) -> list[list[str]]:
    """The -D flag sets to try, widest first: every variant this CPU has, then fewer, then none."""
    flags = cpu_flags() if flags is None else flags
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return [[]]
    have = [d for need, d in VARIANTS.values() if need <= flags]
    return [have[i:] for i in range(len(have))] + [[]]


def build(source: Path = SOURCE, headers: list[Path] = HEADERS, name: str = "cpu_codec") -> Path:
    """Compile ``source`` (once per sources, compiler, flags and CPU) into the cache; the library's path."""
    cc = compiler()
    if cc is None:
        raise RuntimeError(f"no C compiler found (CC={os.environ.get('CC')!r}, cc, gcc on PATH)")
    version = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=60).stdout
    tries = variant_flags()
    texts = [source.read_text(), *(h.read_text() for h in headers if h.exists())]
    key = hashlib.sha256("\0".join([*texts, shlex.join(cc), version, *FLAGS, platform.machine(), repr(tries)]).encode())
    folder = cache_root() / key.hexdigest()[:20]
    lib = folder / f"{name}.so"
    if lib.exists():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(fd)
    try:
        for defines in tries:  # a compiler without one variant's support still builds the others
            done = subprocess.run(
                [*cc, *FLAGS, *defines, str(source), "-o", tmp], capture_output=True, text=True, timeout=300
            )
            if done.returncode == 0:
                break
        else:
            errors = [line for line in done.stderr.splitlines() if "error" in line] or done.stderr.splitlines() or [""]
            raise RuntimeError(f"{shlex.join(cc)} failed: {errors[0].strip()[:300]}")
        os.replace(tmp, lib)  # atomic: a rank racing us loads either its own copy or ours, never half a file
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def _build() -> ctypes.CDLL:
    dll = ctypes.CDLL(str(build()))
    i64, ptr, cint = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    dll.gnnq_encode_simd.argtypes = [ptr, i64, ptr, ptr, ptr, i64, ptr, ptr, cint, cint, ptr, cint, cint]
    dll.gnnq_decode.argtypes = [ptr, i64, i64, ptr, ptr, cint, cint, ptr, ptr]
    dll.gnnq_encode_simd.restype = ctypes.c_int64
    dll.gnnq_decode.restype = ctypes.c_int
    dll.gnnq_simd_supported.argtypes = [cint]
    return dll


def library() -> ctypes.CDLL | None:
    """The loaded library, built on first call; None (after one warning) if it cannot be built."""
    global _lib, _failed
    if _lib is None and not _failed:
        try:
            _lib = _build()
        except Exception as e:  # any failure to build or load means the torch path, never a crash
            _failed = True
            warnings.warn(
                f"gnnq: the C CPU codec is unavailable, using the torch codec ({' '.join(str(e).split())})",
                RuntimeWarning,
                stacklevel=2,
            )
    return _lib


def reset() -> None:
    """Forget the loaded library and any failure (tests)."""
    global _lib, _failed
    _lib, _failed = None, False


def enabled() -> bool:
    """Whether CPU tensors go through the C codec (``GNNQ_CPU_CODEC``, default c when it builds)."""
    mode = os.environ.get("GNNQ_CPU_CODEC", "c")
    if mode not in ("c", "torch"):
        raise ValueError(f"GNNQ_CPU_CODEC must be 'c' or 'torch', not {mode!r}")
    return mode == "c" and library() is not None


def simd_level(simd: str | None = None) -> int:
    """The encoder path: ``simd``, else ``$GNNQ_CODEC_SIMD``, else auto (the widest this CPU and build run)."""
    name = simd or os.environ.get("GNNQ_CODEC_SIMD") or "auto"
    if name not in SIMD:
        raise ValueError(f"GNNQ_CODEC_SIMD must be one of {', '.join(SIMD)}, not {name!r}")
    if name != "auto" and not library().gnnq_simd_supported(SIMD[name]):
        raise ValueError(f"the C codec's {name} path is not available on this CPU or build")
    return SIMD[name]


def simd_paths() -> list[str]:
    """The encoder paths this CPU and build can run, narrowest first (scalar, the reference, first)."""
    return [n for n, level in SIMD.items() if level and library().gnnq_simd_supported(level)]


def threads_default() -> int:
    value = os.environ.get("GNNQ_CODEC_THREADS", "1")
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"GNNQ_CODEC_THREADS must be a whole number >= 1, not {value!r}")
    return int(value)


def _ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def _check_rows(row_idx: torch.Tensor, n: int) -> None:
    if row_idx.numel() and (int(row_idx.min()) < 0 or int(row_idx.max()) >= n):
        raise IndexError(f"row index out of range for a message of {n} rows")


def _encode(
    src: torch.Tensor,
    row_idx: torch.Tensor,
    streams: RowStreams,
    out: torch.Tensor,
    bits: torch.Tensor | None,
    offsets: torch.Tensor | None,
    uniform_bits: int,
    param_dtype: torch.dtype,
    simd: str | None,
    threads: int | None,
) -> bool:
    """Run gnnq_encode_simd into ``out``; whether every row was finite."""
    rows = row_idx.numel()
    _check_rows(row_idx, src.shape[0])
    if len(streams) != rows:
        raise ValueError(f"{len(streams)} noise streams for {rows} rows")
    keys, index = streams.keys.to(torch.int64).contiguous(), streams.index.to(torch.int64).contiguous()
    level = simd_level(simd)
    bad = library().gnnq_encode_simd(
        _ptr(src),
        src.shape[1],
        _ptr(row_idx),
        _ptr(keys),
        _ptr(index),
        rows,
        _ptr(bits),
        _ptr(offsets),
        uniform_bits,
        param_dtype == torch.float16,
        _ptr(out),
        level,
        threads or threads_default(),
    )
    if bad < 0:
        raise RuntimeError(f"the C encoder failed ({bad})")
    return bad == 0


def quantize_pack(
    src: torch.Tensor,
    row_idx: torch.Tensor,
    streams: RowStreams,
    bits: int,
    param_dtype: torch.dtype,
    simd: str | None = None,
    threads: int | None = None,
) -> tuple[torch.Tensor, bool]:
    """``torch_codec.quantize_rows``, in one pass with the draws computed inline (``simd``, ``threads``: see the
    module's docstring)."""
    src, row_idx = src.float().contiguous(), row_idx.to(torch.int64).contiguous()
    rows, dim = row_idx.numel(), src.shape[1]
    if rows == 0 or dim == 0:
        return torch_codec.quantize_rows(src, row_idx, streams, bits, param_dtype)
    wire = torch.empty((rows, torch_codec.row_bytes(dim, bits, param_dtype)), dtype=torch.uint8)
    return wire, _encode(src, row_idx, streams, wire, None, None, bits, param_dtype, simd, threads)


def unpack_dequantize(
    wire: torch.Tensor,
    dim: int,
    bits: int,
    param_dtype: torch.dtype,
    out: torch.Tensor | None = None,
    out_rows: torch.Tensor | None = None,
) -> torch.Tensor:
    """``torch_codec.unpack_dequantize``, into ``out`` if given; with ``out_rows`` too, row r goes to
    ``out[out_rows[r]]`` (``out`` then any contiguous fp32 (N, dim) tensor)."""
    rows = wire.shape[0]
    if wire.shape[1:] != (torch_codec.row_bytes(dim, bits, param_dtype),):
        raise ValueError(f"wire rows of shape {tuple(wire.shape)} for dim {dim} at {bits} bits")
    if out_rows is None:
        out = torch_codec.check_out(out, rows, dim, wire.device)
    else:
        out_rows = out_rows.to(torch.int64).contiguous()
        torch_codec.check_out(out, out.shape[0], dim, wire.device)
        _check_rows(out_rows, out.shape[0])
    if rows == 0 or dim == 0:
        return out
    wire = wire.contiguous()
    library().gnnq_decode(
        _ptr(wire), dim, rows, None, None, bits, param_dtype == torch.float16, _ptr(out_rows), _ptr(out)
    )
    return out


def encode_mixed(
    src: torch.Tensor,
    row_idx: torch.Tensor,
    streams: RowStreams,
    bits: torch.Tensor,
    offsets: torch.Tensor,
    total: int,
    param_dtype: torch.dtype,
    simd: str | None = None,
    threads: int | None = None,
) -> tuple[torch.Tensor, bool]:
    """Row r of ``src[row_idx]`` at ``bits[r]`` (int8) into a flat buffer of ``total`` bytes at ``offsets[r]``; whether
    all finite."""
    src, row_idx = src.float().contiguous(), row_idx.to(torch.int64).contiguous()
    rows, dim = row_idx.numel(), src.shape[1]
    flat = torch.empty(total, dtype=torch.uint8)
    if rows == 0:
        return flat, True
    if dim == 0:
        raise ValueError("messages of width 0 take the torch path")
    if bits.shape != (rows,) or offsets.shape != (rows,):
        raise ValueError("widths and offsets must have one row per message row")
    return flat, _encode(src, row_idx, streams, flat, bits, offsets, 0, param_dtype, simd, threads)


def decode_mixed(
    flat: torch.Tensor,
    dim: int,
    bits: torch.Tensor,
    offsets: torch.Tensor,
    total: int,
    param_dtype: torch.dtype,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Rows at ``bits[r]`` from ``offsets[r]`` of ``flat`` into an (R, dim) fp32 tensor: fresh, or ``out``."""
    if flat.numel() != total:
        raise ValueError(f"received {flat.numel()} bytes where the layout expects {total}")
    rows = bits.numel()
    out = torch_codec.check_out(out, rows, dim, flat.device)
    if rows and dim:
        flat = flat.contiguous()
        library().gnnq_decode(
            _ptr(flat), dim, rows, _ptr(bits), _ptr(offsets), 0, param_dtype == torch.float16, None, _ptr(out)
        )
    return out
