"""The docs' checked commands: fenced blocks marked with an HTML comment, run by tests/e2e/test_docs_commands.py
and checked for shape by tests/unit/test_docs_commands.py.

Two markers, each on the line before a fenced block:

* ``<!-- checked-command -->``: the block holds ``$ COMMAND`` lines, each followed by its quoted output;
* ``<!-- checked-command: COMMAND -->``: the whole block is COMMAND's quoted output (the command is in the prose).

Either may end in ``(checked with OVERRIDES)``: the test appends those overrides (to keep a run short, e.g.
``trainer.epochs=3``); they may change numbers, never the shape. A quoted output's *shape* is each of its lines
with every token holding a digit, a ``/`` or a ``#`` (numbers, times, paths, progress bars) as a wildcard and runs
of spaces as any spaces; a real output has that shape when its lines match the quoted ones in order (lines between
them, such as warnings, are allowed).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- checked-command(?::\s*(?P<cmd>.*?))?(?:\s*\(checked with (?P<extra>[^)]*)\))?\s*-->$")
ENTRY_POINTS = ("gnnq", "gnnq-report", "gnnq-bench")
_WILD = re.compile(r"[0-9/#]")
_RULE = re.compile(r"[-|:]+")  # a table's rule line: its width follows the values


@dataclass
class Checked:
    where: str  # file:line of the marker
    command: list[str]
    extra: list[str]  # overrides the test appends
    output: list[str]  # the quoted output lines


def checked_commands(paths: list[Path] = DOCS) -> list[Checked]:
    found = []
    for path in paths:
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            m = MARKER.match(line.strip())
            if not m:
                continue
            where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{i + 1}"
            if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
                raise ValueError(f"{where}: a checked-command marker must stand right before a fenced block")
            end = next((j for j in range(i + 2, len(lines)) if lines[j].startswith("```")), None)
            if end is None:
                raise ValueError(f"{where}: the fenced block after the marker is not closed")
            block, extra = lines[i + 2 : end], shlex.split(m.group("extra") or "")
            if m.group("cmd"):
                found.append(Checked(where, shlex.split(m.group("cmd")), extra, block))
                continue
            starts = [j for j, b in enumerate(block) if b.startswith("$ ")]
            if not starts:
                raise ValueError(f"{where}: the block holds no '$ COMMAND' line")
            for k, j in enumerate(starts):
                stop = starts[k + 1] if k + 1 < len(starts) else len(block)
                found.append(Checked(where, shlex.split(block[j][2:]), extra, block[j + 1 : stop]))
    for c in found:
        if not c.command or c.command[0] not in ENTRY_POINTS:
            raise ValueError(f"{c.where}: a checked command must start with one of {', '.join(ENTRY_POINTS)}")
    return found


def shape(line: str) -> re.Pattern:
    """The pattern of a quoted output line (see the module's docstring)."""
    parts = [
        r"\S+" if _WILD.search(token) else r"[-|:]+" if _RULE.fullmatch(token) else re.escape(token)
        for token in line.split()
    ]
    return re.compile(r"\s*" + r"\s+".join(parts) + r"\s*")


def missing_lines(quoted: list[str], real: str) -> list[str]:
    """The quoted lines the real output lacks, matched in order (empty: the output has the quoted shape)."""
    lines = [seg for line in real.splitlines() for seg in line.split("\r")]  # progress lines redraw with \r
    at, missing = 0, []
    for q in (q for q in quoted if q.strip()):
        pattern = shape(q)
        j = next((j for j in range(at, len(lines)) if pattern.fullmatch(lines[j])), None)
        if j is None:
            missing.append(q)
        else:
            at = j + 1
    return missing
