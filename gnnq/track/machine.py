"""The machine a run ran on: host, CPU, memory and GPUs, as every run record states them."""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata


def hardware(gpu_names: list[str] | None = None) -> dict:
    """This host: name, CPU model, logical cores, memory, and its GPUs (model, count).

    ``gpu_names``: the GPUs torch saw in rank 0 (its result, ``torch_gpu_names``); without them (a run that
    ended before rank 0 reported) the GPUs the NVIDIA driver lists, ``CUDA_VISIBLE_DEVICES`` applied: the
    launcher does not import torch. ``gpu`` is None without any, else their model names, distinct ones joined by ", ".
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
    gpu_names = driver_gpu_names() if gpu_names is None else gpu_names
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


def torch_gpu_names() -> list[str]:
    """The GPUs torch sees here (a rank: it has imported torch)."""
    import torch

    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]


def driver_gpu_names(root: str = "/proc/driver/nvidia/gpus") -> list[str]:
    """The GPUs the NVIDIA driver lists, by PCI bus id, those of a numeric ``CUDA_VISIBLE_DEVICES`` only."""
    try:
        buses = sorted(os.listdir(root))
    except OSError:
        return []
    names = []
    for bus in buses:
        info = _read(os.path.join(root, bus, "information"))
        model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("Model:")), None)
        if model:
            names.append(model)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return names
    picked = [v.strip() for v in visible.split(",") if v.strip()]
    if not all(v.isdigit() for v in picked):
        return names  # UUIDs or MIG ids: the driver's whole list
    return [names[int(v)] for v in picked if int(v) < len(names)]


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""
