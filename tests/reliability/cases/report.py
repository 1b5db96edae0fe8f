"""gnnq-report as careful as gnnq (docs/runs.md "Reports ..."; issue 45, cases 1-6): a record it cannot read, of a
newer schema, or in a directory the user may not read is left out with one warning naming it; runs of two sweeps
whose points share names are told apart; its files are written whole or not at all (a stop, a full disk); a bad
``--out`` is one line. The runs it reports are copies of one real run (made once per catalogue run)."""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import FAST
from tests.reliability.context import Context, finish

TEMPLATE = "report-template-run"  # beside the cases' roots: the real run every report case copies


def _template(ctx: Context) -> Path:
    """One real run (``FAST``), made by the first report case of a catalogue run and kept for the others."""
    kept = ctx.root.parent / TEMPLATE
    if not (kept / "record.json").is_file():
        made = ctx.root / "template-run"
        out = ctx.run([*FAST, f"hydra.run.dir={made}"])
        if out.proc.returncode != 0:
            raise RuntimeError(f"the run to report failed: {out.last_line}")
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(made, kept, symlinks=True)
        shutil.rmtree(made)
    return kept


def copy_run(ctx: Context, dest: Path, edit=None) -> Path:
    """A copy of the real run at ``dest``; ``edit(record)`` changes its record.json first."""
    shutil.copytree(_template(ctx), dest, symlinks=True)
    if edit:
        path = dest / "record.json"
        record = json.loads(path.read_text())
        edit(record)
        path.write_text(json.dumps(record))
    return dest


def _out(ctx: Context) -> Path:
    return ctx.root / "report"


def _report_runs(ctx: Context) -> list[str]:
    return [str(ctx.runs), "--out", str(_out(ctx))]


# --- 1: a record of a newer schema among good ones ---


def _newer(record: dict) -> None:
    record["schema_version"] = 2
    del record["config"]["partitioner"]  # a layout this gnnq does not know


def _newer_among_good(ctx: Context) -> None:
    copy_run(ctx, ctx.runs / "good-1")
    copy_run(ctx, ctx.runs / "good-2")
    copy_run(ctx, ctx.runs / "newer", _newer)


def _good_runs_reported(ctx: Context, _: Outcome) -> list[str]:
    report = _out(ctx) / "report.md"
    if not report.is_file():
        return ["no report.md"]
    text = report.read_text()
    missing = [name for name in ("good-1", "good-2") if f"| {name} " not in text]
    return [f"report.md does not list {missing}"] * bool(missing) + ["report.md lists the newer record"] * (
        "| newer " in text
    )


# --- 2: two sweeps whose points share names ---


def _two_sweeps(ctx: Context) -> None:
    for sweep in ("A", "B"):
        copy_run(ctx, ctx.root / sweep / "0_trainer.seed=0")


def _runs_column(stdout: str) -> list[str]:
    """The first column of the report's "## Runs" table."""
    lines = stdout.split("## Runs", 1)[-1].split("\n## ", 1)[0].splitlines()
    rows = [line for line in lines if line.startswith("|")][2:]  # the header and its rule left out
    return [row.split("|")[1].strip() for row in rows]


def _rows_told_apart(ctx: Context, outcome: Outcome) -> list[str]:
    names = _runs_column(outcome.proc.stdout)
    if len(names) != 2:
        return [f"{len(names)} rows in the Runs table, expected 2: {names}"]
    return [] if len(set(names)) == 2 else [f"the two runs' rows read the same: {names}"]


# --- 3: a stop while it writes plots; a full disk under --out ---

PNG_END = b"IEND\xaeB`\x82"


def whole_files(out: Path) -> list[str]:
    """Problems with what is in ``out``: a temporary (partial) file left, a PNG or SVG cut short."""
    problems = []
    for p in sorted(out.rglob("*")) if out.is_dir() else []:
        if p.name.startswith("."):
            problems.append(f"a temporary file is left: {p.name}")
        elif p.suffix == ".png" and not p.read_bytes().endswith(PNG_END):
            problems.append(f"{p.name} is cut short (no PNG end)")
        elif p.suffix == ".svg" and not p.read_text(errors="replace").rstrip().endswith("</svg>"):
            problems.append(f"{p.name} is cut short (no </svg>)")
    return problems


def _some_runs(ctx: Context) -> None:
    for i in range(3):
        copy_run(ctx, ctx.runs / f"run-{i}")


def _stop_while_plotting(ctx: Context, args: list[str]) -> Outcome:
    """SIGTERM as soon as the first file (a plot, or its temporary file) appears in --out."""
    proc = ctx.start(args, program="gnnq-report")
    out, deadline = _out(ctx), time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if out.is_dir() and any(out.iterdir()):
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.002)
    return finish(proc, 60)


def _full_out(ctx: Context) -> None:
    _some_runs(ctx)
    ctx.mount(ctx.root / "full", ["-t", "tmpfs", "-o", "size=64k", "tmpfs"])


def _no_partial_file(ctx: Context, _: Outcome) -> list[str]:
    return whole_files(_out(ctx)) + whole_files(ctx.root / "full" / "report")


# --- 4: --out names a file; 5: a run dir the user may not read ---


def _out_file(ctx: Context) -> None:
    _some_runs(ctx)
    _out(ctx).write_text("keep me\n")


def _out_file_kept(ctx: Context, _: Outcome) -> list[str]:
    return [] if _out(ctx).read_text() == "keep me\n" else ["the file named by --out was changed"]


OTHER_USER = 4242


def _other_users_run(ctx: Context) -> None:
    """A run of another user, made under umask 077: its directory 0700, its files 0600, owned by them."""
    copy_run(ctx, ctx.runs / "mine")
    theirs = copy_run(ctx, ctx.runs / "theirs")
    for p in [theirs, *theirs.rglob("*")]:
        shutil.chown(p, OTHER_USER, OTHER_USER)  # not root: PermissionError, the case is skipped
        p.chmod(0o700 if p.is_dir() else 0o600)


# gnnq-report as an ordinary user would run it: root without the capabilities that read any file
AS_A_USER = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-all"]


def _as_a_user(ctx: Context, args: list[str]) -> Outcome:
    return finish(ctx.start(args, program="gnnq-report", prefix=AS_A_USER), 120)


def _case(name: str, what: str, expect: Expect, **kwargs) -> Case:
    return Case("report", name, what, expect, program="gnnq-report", **kwargs)


CASES = [
    _case(
        "newer-schema-record",
        "a record of schema_version 2 (no partitioner) among good ones (issue 45.1): skipped with one warning",
        Expect(exit=0, warning=r"^gnnq-report: warning: skipping .*runs/newer/record\.json: .*schema_version 2"),
        args=_report_runs,
        setup=_newer_among_good,
        verify=_good_runs_reported,
    ),
    _case(
        "same-point-names",
        "gnnq-report A B, two sweeps whose points share names (issue 45.2): the rows are told apart",
        Expect(exit=0),
        args=lambda ctx: [str(ctx.root / "A"), str(ctx.root / "B")],
        setup=_two_sweeps,
        verify=_rows_told_apart,
    ),
    _case(
        "stopped-while-plotting",
        "SIGTERM while gnnq-report writes its plots (issue 45.3): one line, no partial file",
        Expect(exit=143, line=r"^gnnq-report: interrupted \(SIGTERM\)"),
        args=lambda ctx: [*_report_runs(ctx), "--plots", "--dashboard"],
        setup=_some_runs,
        act=_stop_while_plotting,
        verify=_no_partial_file,
    ),
    _case(
        "out-disk-full",
        "--out on a 64 KiB tmpfs with --plots --dashboard (issue 45.3): one line naming the path and ENOSPC",
        Expect(
            exit=1,
            line=r"^gnnq-report: error: --out: cannot write .*full/report/\S+ \(No space left on device \(ENOSPC\)\)",
        ),
        args=lambda ctx: [str(ctx.runs), "--out", str(ctx.root / "full" / "report"), "--plots", "--dashboard"],
        setup=_full_out,
        verify=_no_partial_file,
    ),
    _case(
        "out-is-a-file",
        "--out naming an existing file (issue 45.4): one line naming --out",
        Expect(exit=2, line=r"^gnnq-report: error: --out .*report is a file, not a directory"),
        args=_report_runs,
        setup=_out_file,
        verify=_out_file_kept,
    ),
    _case(
        "unreadable-run-dir",
        "a run dir of another user made under umask 077 (issue 45.5): a warning names it",
        Expect(exit=0, warning=r"^gnnq-report: warning: skipping .*runs/theirs: cannot read it \(Permission denied"),
        args=_report_runs,
        setup=_other_users_run,
        act=_as_a_user,
        verify=lambda ctx, _: [] if (_out(ctx) / "report.md").is_file() else ["no report.md for the readable run"],
    ),
]
