"""Faults in a running job (docs/runs.md "Failures"): a rank that raises, hangs, is killed or stopped, torchrun
killed, the launcher interrupted or killed. Each must end non-zero with one line naming the rank and the
cause, a record marked failed, and no process of the job left."""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import time
from typing import Callable

import yaml

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


def one_host_torchrun() -> list[str]:
    """cluster=multinode with one host: gnnq starts torchrun (with its agent) on this machine."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return ["cluster=multinode", "cluster.hosts=1", f"cluster.rendezvous=127.0.0.1:{port}"]


def signal_launcher(sig: signal.Signals):
    return lambda _, pid: os.kill(pid, sig)


def signal_twice(sig: signal.Signals, gap_s: float = 0.5):
    """The signal twice, ``gap_s`` apart (an impatient Ctrl-C, a scheduler that repeats its SIGTERM)."""

    def strike(_, pid: int) -> None:
        os.kill(pid, sig)
        time.sleep(gap_s)
        os.kill(pid, sig)

    return strike


def _ranks_started(ctx: Context, proc, timeout_s: float = 180) -> int:
    """Rank 1's pid as soon as its process exists (it is still importing: no epoch has run)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gnnq exited ({proc.returncode}) before its ranks started")
        try:
            return procs.rank_pid(ctx.marker, ctx.root, 1)
        except LookupError:
            time.sleep(0.05)
    raise RuntimeError(f"the ranks did not start within {timeout_s:.0f} s")


def while_starting(strike: Callable[[Context, object, int], None], within_s: float | None = None):
    """An act: start gnnq, wait until its ranks exist (before the first epoch), ``strike(ctx, proc, rank 1's pid)``;
    with ``within_s``, the command must end that soon after the strike."""

    def act(ctx: Context, args: list[str]) -> Outcome:
        proc = ctx.start(args)
        try:
            strike(ctx, proc, _ranks_started(ctx, proc))
        except BaseException:
            proc.kill()
            raise
        struck = time.monotonic()
        outcome = finish(proc, 180)
        took = time.monotonic() - struck
        if within_s is not None and took > within_s:
            outcome.notes.append(f"gnnq ended {took:.1f} s after the signal, not within {within_s:.0f} s")
        return outcome

    return act


def during_partitioning(sig: signal.Signals) -> Callable[[Context, list[str]], Outcome]:
    """An act: start gnnq and send ``sig`` once METIS runs (the launcher says its memory estimate just before)."""

    def act(ctx: Context, args: list[str]) -> Outcome:
        proc = ctx.start(args)
        said = []
        try:
            for line in proc.stdout:
                said.append(line)
                if "memory estimate: launcher" in line:
                    time.sleep(0.3)
                    proc.send_signal(sig)
                    break
            else:
                raise RuntimeError(f"gnnq ended before partitioning: {''.join(said)[-300:]}")
        except BaseException:
            proc.kill()
            raise
        return finish(proc, 240)

    return act


def launcher_killed_while_a_rank_hangs(ctx: Context, pid: int) -> None:
    """SIGKILL to gnnq while rank 1 hangs (its peer waits in a collective): every rank must be gone within 10 s
    (the runner's orphan check), long before cluster.timeout_s ends the collective."""
    time.sleep(2)  # rank 1 hangs from epoch 2 on
    os.kill(pid, signal.SIGKILL)


def _changed_hidden(ctx: Context) -> None:
    """A run that failed after its epoch-1 checkpoint; then its config.yaml's model.hidden changed (16 -> 48)."""
    args = [*FAST, "trainer.epochs=3", "trainer.checkpoint_every=1"]
    outcome = ctx.run(args, _inject("rank=0,epoch=2"))
    if outcome.proc.returncode != 1:
        raise RuntimeError(f"the run to resume did not fail as planned: {outcome.last_line}")
    (run_dir,) = ctx.run_dirs()
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["model"]["hidden"] = 48
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    ctx.state["run_dir"] = run_dir
    ctx.state["checkpoints"] = _digests(run_dir / "checkpoints")


def _digests(folder) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def _checkpoints_untouched(ctx: Context, outcome: Outcome) -> list[str]:
    same = _digests(ctx.state["run_dir"] / "checkpoints") == ctx.state["checkpoints"]
    return [] if same else ["the checkpoint files changed"]


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
        "torchrun killed by SIGKILL (cluster=multinode, one host: local jobs have no torchrun): its ranks go with it",
        failed(r"torchrun was killed by SIGKILL"),
        args=lambda ctx: [*ENDLESS, *one_host_torchrun()],
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
        "metis-sigterm",
        "SIGTERM to gnnq while METIS partitions (a scheduler's stop during the launcher's own work)",
        _interrupted(signal.SIGTERM),
        args=["logger=none", "dataset.num_nodes=300000", "dataset.avg_degree=20", "trainer.epochs=1"],
        act=during_partitioning(signal.SIGTERM),
    ),
    Case(
        "faults",
        "launcher-sigint-twice",
        "Ctrl-C twice within 2 s mid-training: still exit 130, not killed by the second",
        _interrupted(signal.SIGINT),
        args=ENDLESS,
        act=break_while_training(signal_twice(signal.SIGINT)),
    ),
    Case(
        "faults",
        "launcher-sighup",
        "SIGHUP to gnnq mid-training (its terminal or SSH session closed): like SIGTERM",
        _interrupted(signal.SIGHUP),
        args=ENDLESS,
        act=break_while_training(signal_launcher(signal.SIGHUP)),
    ),
    Case(
        "faults",
        "launcher-sigkill-rank-hangs",
        "gnnq killed by SIGKILL while rank 1 hangs: its ranks gone within 10 s, not at cluster.timeout_s=60",
        Expect(exit=-9, line=None, records=()),
        args=[*ENDLESS, "cluster.timeout_s=60"],
        env=_inject("rank=1,epoch=2,mode=hang"),
        act=break_while_training(launcher_killed_while_a_rank_hangs),
    ),
    Case(
        "faults",
        "rank1-sigterm",
        "rank 1 stopped by SIGTERM from outside mid-training: named with the signal",
        failed(r"rank 1 was stopped by SIGTERM from outside gnnq"),
        args=ENDLESS,
        act=break_while_training(kill_rank(1, signal.SIGTERM)),
    ),
    Case(
        "faults",
        "rank1-sigkill-at-start",
        "rank 1 killed by SIGKILL before the first epoch: rank 1 named, rank 0 stopped within seconds",
        failed(r"rank 1 was killed by SIGKILL"),
        args=ENDLESS,
        act=while_starting(lambda ctx, proc, rank1: os.kill(rank1, signal.SIGKILL), within_s=20),
    ),
    Case(
        "faults",
        "ctrl-c-at-start",
        "Ctrl-C while the ranks start (still importing): exit 130 within 5 s",
        _interrupted(signal.SIGINT),
        args=ENDLESS,
        act=while_starting(lambda ctx, proc, rank1: proc.send_signal(signal.SIGINT), within_s=5),
    ),
    Case(
        "faults",
        "resume-changed-hidden",
        "resume after config.yaml's model.hidden changed: one line naming the key and both shapes",
        failed(r"does not match the run's config: model\.\S+ has shape \[16.*\[48", replaces_records=True),
        args=lambda ctx: [f"resume={ctx.state['run_dir']}"],
        setup=_changed_hidden,
        verify=_checkpoints_untouched,
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
