"""The machine a run ran on: host, CPU, memory and GPUs, as every run record states them."""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata


def hardware() -> dict:
    """This host: name, CPU model, logical cores, memory, and the GPUs torch sees (model, count).

    GPUs are those visible to this process (``CUDA_VISIBLE_DEVICES`` applies); ``gpu`` is None
    without any, else their model names, distinct ones joined by ", ".
    """
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in _read("/proc/cpuinfo").splitlines()
            if line.startswith("model name")
        ),
        None,
    )
    mem_kib = next(
        (int(line.split()[1]) for line in _read("/proc/meminfo").splitlines() if line.startswith("MemTotal")), 0
    )
    gpu_names = _gpu_names()
    return {
        "hostname": socket.gethostname(),
        "cpu": cpu or platform.processor() or None,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "gpu": ", ".join(dict.fromkeys(gpu_names)) or None,
        "gpu_count": len(gpu_names),
    }


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _gpu_names() -> list[str]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
