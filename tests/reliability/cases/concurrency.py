"""Two gnnq at once: a second run on a busy run dir exits at once naming the holder's pid (and the first goes
on, and ends 143 on SIGTERM); two runs sharing a fresh data root both finish; two resumes of one run: one
continues it, the other is refused."""

from __future__ import annotations

import json
import signal

from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import ENDLESS, FAST
from tests.reliability.cases.resume import interrupted
from tests.reliability.context import Context, finish


def _busy(ctx: Context, args: list[str]) -> Outcome:
    run_dir = ctx.runs / "busy"
    first = ctx.start([*ENDLESS, f"hydra.run.dir={run_dir}"])
    try:
        ctx.wait_for_training(first)
        second = ctx.run(args)
        notes = [] if first.poll() is None else ["the first run ended when the second started"]
        first.send_signal(signal.SIGTERM)
        ended = finish(first, 120)
    except BaseException:
        first.kill()
        raise
    ctx.state["pid"] = first.pid
    if ended.proc.returncode != 143:
        notes.append(f"the first run ended {ended.proc.returncode} on SIGTERM, expected 143")
    epochs = [json.loads(line)["epoch"] for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    if epochs != list(range(1, len(epochs) + 1)):
        notes.append(f"the first run's rows are not one run's, in order: {epochs}")
    second.notes += notes
    return second


def _names_the_holder(ctx: Context, outcome: Outcome) -> list[str]:
    return (
        [] if f"(pid {ctx.state['pid']})" in outcome.last_line else [f"the line does not name pid {ctx.state['pid']}"]
    )


def _two_at_once(ctx: Context, args: list[str]) -> Outcome:
    first = ctx.start([*args, f"hydra.run.dir={ctx.runs / 'a'}"])
    second = ctx.start([*args, f"hydra.run.dir={ctx.runs / 'b'}"])
    a, b = finish(first, 300), finish(second, 300)
    if a.proc.returncode != 0:
        b.notes.append(f"the first run ended {a.proc.returncode}: {a.last_line}")
    return b


def _two_resumes(ctx: Context, args: list[str]) -> Outcome:
    """Both resumes start at once (one started after the other's ranks run could find the run already finished on a
    loaded machine): the one refused is the outcome; the other must have continued the run to its end."""
    procs_ = [ctx.start(args), ctx.start(args)]
    try:
        done = [finish(p, 300) for p in procs_]
    except BaseException:
        for p in procs_:
            p.kill()
        raise
    refused = [d for d in done if d.proc.returncode == 2]
    continued = [d for d in done if d.proc.returncode == 0]
    if len(refused) != 1 or len(continued) != 1:
        outcome = done[1]
        outcome.notes.append(
            "expected one resume refused (exit 2) and one finished (exit 0), got exits "
            + ", ".join(str(d.proc.returncode) for d in done)
        )
        return outcome
    return refused[0]


CASES = [
    Case(
        "concurrency",
        "busy-run-dir",
        "a second gnnq on a run dir in use; then SIGTERM ends the first with 143",
        Expect(
            exit=2,
            line=r"^gnnq: error: hydra\.run\.dir: .*busy is in use by another gnnq \(pid \d+\)",
            records=("failed",),
        ),
        args=lambda ctx: [*FAST, f"hydra.run.dir={ctx.runs / 'busy'}"],
        act=_busy,
        verify=_names_the_holder,
    ),
    Case(
        "concurrency",
        "shared-data-root",
        "two runs at once on one fresh data root (one builds the graph's parts)",
        Expect(exit=0, records=("ok", "ok")),
        args=FAST,
        act=_two_at_once,
    ),
    Case(
        "concurrency",
        "two-resumes",
        "two resumes of one interrupted run at once: one continues it, the other is refused",
        Expect(
            exit=2,
            line=r"^gnnq: error: .*is in use by another gnnq \(pid \d+\)",
            records=("ok",),
            replaces_records=True,
        ),
        args=lambda ctx: [f"resume={ctx.state['run_dir']}"],
        setup=interrupted,
        act=_two_resumes,
    ),
]
