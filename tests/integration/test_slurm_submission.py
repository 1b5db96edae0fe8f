"""cluster=slurm without a Slurm cluster: the sbatch script submitit writes (needs srun on PATH), the srun + torchrun
command, config checks.

Here: the cases with real processes (gloo ranks, torchrun or gnnq);
the others are in `tests/unit/test_slurm_submission.py`.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import REPO

needs_submitit = pytest.mark.needs_extra("slurm")  # skips without hydra-submitit-launcher (tests/conftest.py)


@pytest.mark.parametrize(
    "module, message",
    [
        (
            "hydra_plugins.hydra_submitit_launcher",
            "cluster=slurm needs hydra-submitit-launcher, which is not installed: pip install -e '.[slurm]'",
        ),
        pytest.param(
            "hydra_plugins.gnnq_slurm_launcher",
            "cluster=slurm needs gnnq's launcher plugin (hydra_plugins/gnnq_slurm_launcher/), "
            "which this install of gnnq does not provide: reinstall it from the checkout, pip install -e '.[slurm]'",
            marks=needs_submitit,
        ),  # without the extra, its absence is named first
    ],
    ids=["hydra-submitit-launcher", "gnnq_slurm_launcher"],
)
def test_without_the_launcher_installed_the_fix_is_named(tmp_path, module, message):
    # sys.modules[name] = None is how Python itself marks a module as not importable
    code = (
        f"import sys; sys.modules[{module!r}] = None; "
        "sys.argv = ['gnnq', 'cluster=slurm', 'logger=none']; from gnnq.cli import main; main()"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "GNNQ_RUNS": str(tmp_path)},
    )
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == [f"gnnq: error: {message}"]
    assert not list(tmp_path.rglob("record.json"))
