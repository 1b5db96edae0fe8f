"""What one reliability case is: a setup, the real gnnq command, what must come out of it."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from tests.reliability.context import Context


# gnnq's own lines, and those of its other commands (gnnq-report, gnnq-bench)
ERROR_LINE = re.compile(r"^gnnq(-report|-bench)?: error:")
WARNING_LINE = re.compile(r"^(\[gnnq\]|gnnq-report:|gnnq-bench( \w+)?:) warning:")
COMMANDS = ("gnnq", "gnnq-report", "gnnq-bench")


@dataclass(frozen=True)
class Expect:
    """What the user must get.

    exit: the exit code of the command (the one the case acts on).
    line: a regex searched in the last line of its stderr (``gnnq: error: ...``, ``gnnq-report: error: ...``);
        None: no error line.
    records: the sorted statuses of the records this case wrote or changed; () for none.
    warning: a regex one ``[gnnq] warning:`` (``gnnq-report: warning:``) line of stderr must match.
    replaces_records: the case rewrites an earlier record on purpose (resume, overwrite=true).
    """

    exit: int
    line: str | None = None
    records: tuple[str, ...] = ()
    warning: str | None = None
    replaces_records: bool = False

    def describe(self) -> str:
        parts = [f"exit {self.exit}"]
        parts.append(f"line ~ /{self.line}/" if self.line else "no error line")
        if self.warning:
            parts.append(f"warning ~ /{self.warning}/")
        parts.append("records " + ",".join(self.records) if self.records else "no record")
        return "; ".join(parts)


@dataclass
class Outcome:
    """What the case's command did; ``notes`` are extra problems the case's own checks found."""

    proc: subprocess.CompletedProcess
    notes: list[str] = field(default_factory=list)

    @property
    def stderr_lines(self) -> list[str]:
        return [line for line in (self.proc.stderr or "").splitlines() if line.strip()]

    @property
    def last_line(self) -> str:
        lines = self.stderr_lines
        return lines[-1] if lines else ""

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr_lines if ERROR_LINE.match(line)]

    def warnings(self) -> list[str]:
        return [line for line in self.stderr_lines if WARNING_LINE.match(line)]

    def judge(self, expect: Expect) -> list[str]:
        """Every way this outcome differs from ``expect`` (records aside: the runner checks those)."""
        problems = list(self.notes)
        if self.proc.returncode != expect.exit:
            problems.append(f"exit {self.proc.returncode}, expected {expect.exit}")
        output = (self.proc.stdout or "") + (self.proc.stderr or "")
        if "Traceback" in output:
            problems.append("a traceback was printed")
        errors = self.error_lines()
        if expect.line is None and errors:
            problems.append(f"unexpected error line: {errors[0]}")
        if expect.line is not None:
            if len(errors) > 1:
                problems.append(f"{len(errors)} error lines, expected one")
            if not re.search(expect.line, self.last_line):
                problems.append(f"last line does not match: {self.last_line[:300]!r}")
        if expect.warning and not any(re.search(expect.warning, w) for w in self.warnings()):
            problems.append(f"no warning line matches /{expect.warning}/")
        return problems


@dataclass(frozen=True)
class Case:
    """One case of the catalogue.

    args: the command line (after ``python -m gnnq.cli``, or after ``program``), or a function of the context
        giving it.
    program: which of gnnq's commands the case runs: ``gnnq`` (default), ``gnnq-report`` or ``gnnq-bench``.
    setup: writes the case's files (a graph, an earlier run, a mount) before the command.
    act: runs the command its own way (start, wait, signal) instead of running it to the end.
    verify: extra checks after the command; returns problems.
    """

    family: str
    name: str
    what: str
    expect: Expect
    args: list[str] | Callable[[Context], list[str]] = field(default_factory=list)
    setup: Callable[[Context], None] | None = None
    act: Callable[[Context, list[str]], Outcome] | None = None
    verify: Callable[[Context, Outcome], list[str]] | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 300
    program: str = "gnnq"

    def __post_init__(self):
        if self.program not in COMMANDS:
            raise ValueError(f"{self.id}: program={self.program!r}; one of {COMMANDS}")

    @property
    def id(self) -> str:
        return f"{self.family}/{self.name}"

    def command(self, ctx: Context) -> list[str]:
        return list(self.args(ctx) if callable(self.args) else self.args)
