"""Faults in a running job (docs/runs.md "Failures"): a rank that raises, hangs, is killed or stopped, torchrun
killed, the launcher interrupted or killed. Each must end non-zero with one line naming the rank and the
cause, a record marked failed, and no process of the job left."""

from __future__ import annotations

import os
import signal
from typing import Callable

from tests.reliability import procs
from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import ENDLESS, FAST, failed
from tests.reliability.context import Context, finish

TIMEOUT = ["cluster.timeout_s=10"]


def break_while_training(
    strike: Callable[[Context, int], int], timeout_s: float = 180
) -> Callable[[Context, list[str]], Outcome]:
    """An act: start gnnq, wait until rank 0 wrote a metrics row, send ``strike(ctx, gnnq's pid)``'s signal."""

    def act(ctx: Context, args: list[str]) -> Outcome:
        proc = ctx.start(args)
        try:
            ctx.wait_for_training(proc)
            strike(ctx, proc.pid)
        except BaseException:
            proc.kill()
            raise
        return finish(proc, timeout_s)

    return act


def kill_rank(rank: int, sig: signal.Signals = signal.SIGKILL):
    return lambda ctx, _: os.kill(procs.rank_pid(ctx.marker, ctx.root, rank), sig)


def kill_torchrun(ctx: Context, _: int) -> None:
    os.kill(procs.torchrun_pid(ctx.marker, ctx.root), signal.SIGKILL)


def signal_launcher(sig: signal.Signals):
    return lambda _, pid: os.kill(pid, sig)


def _interrupted(sig: signal.Signals) -> Expect:
    return Expect(exit=128 + sig, line=rf"^gnnq: interrupted \({sig.name}\); all ranks stopped", records=("failed",))


def _inject(spec: str) -> dict:
    return {"GNNQ_FAULT_INJECT": spec}


CASES = [
    Case(
        "faults",
        "rank1-raises",
        "rank 1 raises at epoch 2",
        failed(r"rank 1 failed: RuntimeError: injected fault at epoch 2"),
        args=[*FAST, "trainer.epochs=3"],
        env=_inject("rank=1,epoch=2"),
    ),
    Case(
        "faults",
        "rank0-raises",
        "rank 0 raises at epoch 2",
        failed(r"rank 0 failed: RuntimeError: injected fault at epoch 2"),
        args=[*FAST, "trainer.epochs=3"],
        env=_inject("rank=0,epoch=2"),
    ),
    Case(
        "faults",
        "rank-hangs",
        "rank 1 stops taking part at epoch 3 (cluster.timeout_s=10)",
        failed(r"rank 1 stopped taking part.*cluster\.timeout_s|rank 1 stopped taking part"),
        args=[*ENDLESS, *TIMEOUT],
        env=_inject("rank=1,epoch=3,mode=hang"),
    ),
    Case(
        "faults",
        "rank1-sigkill",
        "rank 1 killed by SIGKILL mid-training",
        failed(r"rank 1 was killed by SIGKILL"),
        args=ENDLESS,
        act=break_while_training(kill_rank(1)),
    ),
    Case(
        "faults",
        "rank0-sigkill",
        "rank 0 killed by SIGKILL mid-training",
        failed(r"rank 0 was killed by SIGKILL"),
        args=ENDLESS,
        act=break_while_training(kill_rank(0)),
    ),
    Case(
        "faults",
        "rank-sigstop",
        "rank 1 frozen by SIGSTOP (cluster.timeout_s=10)",
        failed(r"rank 1 stopped responding"),
        args=[*ENDLESS, *TIMEOUT],
        act=break_while_training(kill_rank(1, signal.SIGSTOP), timeout_s=240),
    ),
    Case(
        "faults",
        "torchrun-sigkill",
        "torchrun killed by SIGKILL: its ranks go with it",
        failed(r"torchrun was killed by SIGKILL"),
        args=ENDLESS,
        act=break_while_training(kill_torchrun),
    ),
    Case(
        "faults",
        "launcher-sigint",
        "Ctrl-C to gnnq mid-training",
        _interrupted(signal.SIGINT),
        args=ENDLESS,
        act=break_while_training(signal_launcher(signal.SIGINT)),
    ),
    Case(
        "faults",
        "launcher-sigterm",
        "SIGTERM to gnnq mid-training (a scheduler's stop)",
        _interrupted(signal.SIGTERM),
        args=ENDLESS,
        act=break_while_training(signal_launcher(signal.SIGTERM)),
    ),
    Case(
        "faults",
        "launcher-sigkill",
        "gnnq itself killed by SIGKILL: no rank or torchrun may outlive it",
        Expect(exit=-9, line=None, records=()),
        args=ENDLESS,
        act=break_while_training(signal_launcher(signal.SIGKILL)),
    ),
    Case(
        "faults",
        "multirun-goes-on",
        "a sweep whose first point fails (no Cora files) runs its second point",
        Expect(exit=1, line=r"1 of 2 runs failed: ", records=("failed", "ok")),
        args=[
            "-m",
            "logger=none",
            "model.hidden=16",
            "trainer.epochs=2",
            "dataset=cora,synthetic",
            "dataset.download=false",
        ],
    ),
]
