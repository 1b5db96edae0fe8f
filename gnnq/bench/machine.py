"""A short description of the machine a benchmark ran on."""

from __future__ import annotations

import os
import platform


def describe_machine() -> dict:
    cpu = next((line.split(":", 1)[1].strip() for line in _read("/proc/cpuinfo").splitlines() if line.startswith("model name")), None)
    mem_kib = next((int(line.split()[1]) for line in _read("/proc/meminfo").splitlines() if line.startswith("MemTotal")), 0)
    import torch

    return {
        "cpu": cpu or platform.processor(),
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
    }


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
