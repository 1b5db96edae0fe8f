"""Run cases and judge them: the case's own expectations, then the global checks."""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

from tests.reliability import checks, procs
from tests.reliability.case import Case, Outcome
from tests.reliability.context import Context


def _statuses(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Statuses of the records the case wrote or changed."""
    out = []
    for path, digest in after.items():
        if before.get(path) != digest:
            try:
                out.append(json.loads(Path(path).read_text()).get("status", "?"))
            except (OSError, ValueError):
                out.append("unreadable")
    return sorted(out)


def _observed(outcome: Outcome | None, statuses: list[str]) -> str:
    if outcome is None:
        return "did not run"
    parts = [f"exit {outcome.proc.returncode}"]
    errors = outcome.error_lines()
    last = outcome.last_line
    if errors or last.startswith(("gnnq: ", "gnnq-report: ", "gnnq-bench: ")):
        parts.append(last[:240])
    parts.append("records " + ",".join(statuses) if statuses else "no record")
    return "; ".join(parts)


def run_case(case: Case, parent: Path, keep: bool = False) -> dict:
    """Set up, run and check one case; never raises (a broken case is a failed one)."""
    ctx = Context(parent, case.id)
    started = time.monotonic()
    outcome, problems, statuses, lost, orphans, leaks = None, [], [], [], [], []
    skipped = None
    try:
        if case.setup:
            case.setup(ctx)
        before = checks.records(ctx.root)
        args = case.command(ctx)
        outcome = case.act(ctx, args) if case.act else ctx.run(args, case.env, case.timeout_s, case.program)
        problems += outcome.judge(case.expect)
        if case.verify:
            problems += case.verify(ctx, outcome)
        after = checks.records(ctx.root)
        statuses = _statuses(before, after)
        if tuple(statuses) != case.expect.records:
            problems.append(f"records {statuses or 'none'}, expected {list(case.expect.records) or 'none'}")
        lost = [] if case.expect.replaces_records else checks.lost_records(before, after)
        output = outcome.proc.stdout + outcome.proc.stderr
        leaks = checks.files_holding(ctx.root, ctx.secret) + (
            ["(the command's output)"] if ctx.secret in output else []
        )
    except PermissionError as exc:  # a mount this machine does not allow: the case cannot be set up here
        skipped = str(exc)
    except Exception as exc:  # noqa: BLE001 - a broken setup or check fails its case, the catalogue goes on
        problems.append(f"the case broke: {type(exc).__name__}: {exc}".splitlines()[0])
        traceback.print_exc()
    finally:
        orphans = procs.outliving(ctx.marker, ctx.root)
        orphan_cmds = [procs.cmdline(p)[:160] for p in orphans]
        procs.kill_all(orphans)
        ctx.close(keep)
    if lost:
        problems.append(f"records lost or changed: {lost}")
    if orphans:
        problems.append(f"{len(orphans)} process(es) outlived the case: {orphan_cmds}")
    if leaks:
        problems.append(f"the planted secret was written to {leaks}")
    return {
        "family": case.family,
        "case": case.name,
        "what": case.what,
        "expected": case.expect.describe(),
        "observed": skipped and f"skipped: {skipped}" or _observed(outcome, statuses),
        "result": "skip" if skipped else ("FAIL" if problems else "pass"),
        "problems": problems,
        "records_lost": len(lost),
        "orphans": len(orphans),
        "secrets_written": len(leaks),
        "seconds": round(time.monotonic() - started, 1),
    }


def run_catalogue(cases: list[Case], parent: Path, keep: bool = False, log=print) -> list[dict]:
    results = []
    for i, case in enumerate(cases, 1):
        log(f"[reliability] {i}/{len(cases)} {case.id} ...", end=" ", flush=True)
        result = run_case(case, parent, keep)
        results.append(result)
        log(f"{'ok' if result['result'] == 'pass' else result['result']} ({result['seconds']:.1f} s)", flush=True)
        for problem in result["problems"]:
            log(f"[reliability]     {problem}", flush=True)
    return results
