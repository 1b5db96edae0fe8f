"""Secrets (docs/runs.md "W&B"): the W&B API key in the environment reaches no file and no output, whether the
run finishes, fails or is interrupted, and gnnq-report over its runs writes none either. Every case of the
catalogue plants a key and is scanned; these are the cases that log to W&B (offline)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import ENDLESS, FAST, OK, failed, refused
from tests.reliability.cases.faults import break_while_training, signal_launcher
from tests.reliability.context import Context

WANDB = [a for a in FAST if a != "logger=none"] + ["logger=wandb", "logger.mode=offline"]


def _wandb_and_report(ctx: Context, outcome: Outcome) -> list[str]:
    (run_dir,) = ctx.run_dirs()
    problems = (
        []
        if list((run_dir / "wandb").glob("offline-run-*/*.wandb"))
        else ["W&B wrote no offline run under the run dir"]
    )
    report = Path(sys.executable).parent / "gnnq-report"
    cmd = [str(report), str(ctx.runs), "--out", str(ctx.root / "report"), "--dashboard"]
    rep = subprocess.run(cmd, capture_output=True, text=True, env=ctx.env, timeout=300)
    if rep.returncode != 0:
        problems.append(f"gnnq-report ended {rep.returncode}: {rep.stderr.strip()[-200:]}")
    if ctx.secret in rep.stdout + rep.stderr:
        problems.append("the key is in gnnq-report's output")
    return problems


CASES = [
    Case(
        "secrets",
        "wandb-offline-run",
        "a W&B offline run and its report (dashboard) with WANDB_API_KEY set",
        OK,
        args=WANDB,
        verify=_wandb_and_report,
    ),
    Case(
        "secrets",
        "wandb-failed-run",
        "a W&B run whose rank 1 raises",
        failed(r"rank 1 failed: RuntimeError: injected fault"),
        args=[*WANDB, "trainer.epochs=3"],
        env={"GNNQ_FAULT_INJECT": "rank=1,epoch=2"},
    ),
    Case(
        "secrets",
        "wandb-interrupted-run",
        "a W&B run stopped by SIGINT",
        Expect(exit=130, line=r"^gnnq: interrupted \(SIGINT\)", records=("failed",)),
        args=[a for a in ENDLESS if a != "logger=none"] + ["logger=wandb", "logger.mode=offline"],
        act=break_while_training(signal_launcher(signal.SIGINT)),
    ),
]
CASES += [
    Case(
        "secrets",
        "unknown-wandb-mode",
        "WANDB_MODE=sometimes in the environment (issues 31.15, 45.15): a config error naming WANDB_MODE and its "
        "allowed values, nothing written",
        refused(r"WANDB_MODE=sometimes \(in the environment\) is not allowed; allowed: online, offline"),
        args=WANDB,
        env={"WANDB_MODE": "sometimes"},
        verify=lambda ctx, _: [f"written: {ctx.run_dirs()}"] if ctx.run_dirs() else [],
    ),
]
