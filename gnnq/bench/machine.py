"""A short description of the machine a benchmark ran on: the run record's hardware, the OS and versions."""

from __future__ import annotations

import platform

from gnnq.track.machine import hardware, package_version


def describe_machine() -> dict:
    """``hardware()`` with the OS and the versions a benchmark's timings depend on."""
    import torch

    return {
        **hardware(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.cuda.is_available(),
        "cuda_version": torch.version.cuda,
        "triton": package_version("triton"),
    }
