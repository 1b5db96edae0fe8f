"""Resuming (docs/runs.md "Checkpoints and resuming"): an interrupted run continues to the end; what cannot be
continued (finished, no checkpoint, damaged checkpoint, other arguments, no run there) is refused with one
line, exit 2, and the earlier record left as it was."""

from __future__ import annotations

from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import FAST, refused
from tests.reliability.context import Context

CHECKPOINTED = [*FAST, "trainer.epochs=4", "trainer.checkpoint_every=2"]


def _run(ctx: Context, args: list[str], env: dict | None = None, exit: int = 0) -> None:
    out = ctx.run(args, env)
    if out.proc.returncode != exit:
        raise RuntimeError(f"the earlier run ended {out.proc.returncode}, not {exit}: {out.last_line}")
    (ctx.state["run_dir"],) = ctx.run_dirs()


def interrupted(ctx: Context, every: int = 2) -> None:
    """A run that failed at epoch 3 (rank 1 raised), after the checkpoint of epoch 2 (with ``every`` = 2)."""
    _run(ctx, [*CHECKPOINTED, f"trainer.checkpoint_every={every}"], {"GNNQ_FAULT_INJECT": "rank=1,epoch=3"}, exit=1)


def _damaged(name: str, how):
    def setup(ctx: Context) -> None:
        interrupted(ctx)
        how(next((ctx.state["run_dir"] / "checkpoints").rglob(name)))

    return setup


def _flip(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _resume(ctx: Context) -> list[str]:
    return [f"resume={ctx.state['run_dir']}"]


def _resumed_to_the_end(ctx: Context, _: Outcome) -> list[str]:
    record = ctx.record(ctx.state["run_dir"])
    rows = (ctx.state["run_dir"] / "metrics.jsonl").read_text().splitlines()
    problems = (
        []
        if record.get("resumed_from_epoch") == 2
        else [f"resumed_from_epoch {record.get('resumed_from_epoch')}, expected 2"]
    )
    return problems + ([] if len(rows) == 4 else [f"{len(rows)} metrics rows, expected 4"])


CASES = [
    Case(
        "resume",
        "interrupted-run",
        "resume a run that failed after its epoch-2 checkpoint: it ends ok",
        Expect(exit=0, records=("ok",), replaces_records=True),
        args=_resume,
        setup=interrupted,
        verify=_resumed_to_the_end,
    ),
    Case(
        "resume",
        "finished-run",
        "resume a run that finished",
        refused(r"resume=.*nothing to resume"),
        args=_resume,
        setup=lambda ctx: _run(ctx, [*FAST, "trainer.checkpoint_every=1"]),
    ),
    Case(
        "resume",
        "no-checkpoint",
        "resume a failed run that saved no checkpoint",
        refused(r"no checkpoint to resume from.*trainer\.checkpoint_every=0"),
        args=_resume,
        setup=lambda ctx: interrupted(ctx, every=0),
    ),
    Case(
        "resume",
        "corrupted-checkpoint",
        "a rank file of the checkpoint with one byte changed",
        refused(r"rank1\.pt is corrupted.*sha256"),
        args=_resume,
        setup=_damaged("rank1.pt", _flip),
    ),
    Case(
        "resume",
        "missing-rank-file",
        "a rank file of the checkpoint deleted",
        refused(r"rank0\.pt"),
        args=_resume,
        setup=_damaged("rank0.pt", lambda p: p.unlink()),
    ),
    Case(
        "resume",
        "garbage-latest-json",
        "checkpoints/latest.json that is not JSON",
        refused(r"latest\.json"),
        args=_resume,
        setup=_damaged("latest.json", lambda p: p.write_text("{not json")),
    ),
    Case(
        "resume",
        "with-other-arguments",
        "resume=<dir> with an override",
        refused(r"takes nothing else.*trainer\.epochs=9"),
        args=lambda ctx: [*_resume(ctx), "trainer.epochs=9"],
        setup=interrupted,
    ),
    Case(
        "resume",
        "nowhere",
        "resume a directory that holds no run",
        refused(r"no config\.yaml there"),
        args=lambda ctx: [f"resume={ctx.root / 'nowhere'}"],
    ),
]


def _failed_twice(ctx: Context) -> None:
    """Attempt 1 fails at epoch 3 after the epoch-2 checkpoint; its resume fails at epoch 3 again (no newer one)."""
    interrupted(ctx)
    out = ctx.run(_resume(ctx), {"GNNQ_FAULT_INJECT": "rank=1,epoch=3"})
    if out.proc.returncode != 1:
        raise RuntimeError(f"the first resume ended {out.proc.returncode}, not 1: {out.last_line}")


def _every_attempts_log(ctx: Context, outcome: Outcome) -> list[str]:
    logs = ctx.state["run_dir"] / "logs"
    kept = sorted(p.name for p in logs.glob("torchrun*.log"))
    want = ["torchrun-until-epoch-2-2.log", "torchrun-until-epoch-2.log", "torchrun.log"]
    problems = [] if kept == want else [f"logs {kept}, expected {want}"]
    for name in want[:2]:  # both failed attempts' logs still hold their crash
        if (logs / name).is_file() and "injected fault" not in (logs / name).read_text(errors="replace"):
            problems.append(f"{name} does not hold its attempt's crash")
    return problems + _resumed_to_the_end(ctx, outcome)


CASES += [
    Case(
        "resume",
        "third-attempt-keeps-every-log",
        "a run that failed, was resumed and failed again, resumed once more (issue 31.14): all three logs kept",
        Expect(exit=0, records=("ok",), replaces_records=True),
        args=_resume,
        setup=_failed_twice,
        verify=_every_attempts_log,
    ),
]
