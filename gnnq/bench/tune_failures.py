"""What ``gnnq-bench tune`` could not produce: a leaderboard row (method, dataset, default or tuned setting) whose rerun
failed or whose tuning gave no setting, with the one line that says why. Tune goes on with the other methods, says
each missing row when it happens and again at the end, writes them to ``DIR/missing_rows.txt`` (removed when none is
missing) and exits nonzero."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from gnnq.track.files import write_text_atomic

MISSING_FILE = "missing_rows.txt"
ERROR_PREFIX = "gnnq: error:"  # how gnnq prints a refused config or a failed run (gnnq.cli, gnnq.launch.job)


@dataclass(frozen=True)
class MissingRow:
    """One row the leaderboard lacks: ``setting`` is ``default`` or ``tuned``; ``exit_code`` None: never rerun."""

    method: str
    dataset: str
    setting: str
    overrides: tuple[str, ...]
    exit_code: int | None
    error: str

    def line(self) -> str:
        what = self.setting + (f" ({' '.join(self.overrides)})" if self.overrides else "")
        how = "not rerun" if self.exit_code is None else f"rerun failed with exit code {self.exit_code}"
        return f"{self.method} on {self.dataset}, {what} setting: {how}: {self.error}"


def error_line(stderr_lines: list[str]) -> str:
    """The first ``gnnq: error:`` line (the cause, before a sweep's summary), else the last non-empty line."""
    lines = [line.strip() for line in stderr_lines if line.strip()]
    errors = [line for line in lines if line.startswith(ERROR_PREFIX)]
    if errors:
        return errors[0]
    return lines[-1] if lines else "no error line on stderr"


def run_keeping_stderr(cmd: list[str], env: dict[str, str]) -> tuple[int, list[str]]:
    """Run ``cmd``, echoing its stderr as it comes; its exit code and stderr lines."""
    kept: list[str] = []
    with subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True, errors="replace") as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            kept.append(line)
    return proc.returncode, kept


def report_missing(rows: list[MissingRow], out: Path) -> list[str]:
    """The closing lines naming every missing row (none: no lines); ``out/missing_rows.txt`` holds the same."""
    path = out / MISSING_FILE
    if not rows:
        path.unlink(missing_ok=True)
        return []
    lines = [
        f"gnnq-bench tune: {len(rows)} leaderboard row(s) missing (gnnq-report on {out}/default and {out}/tuned "
        "lacks them):",
        *(f"  - {row.line()}" for row in rows),
    ]
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, "\n".join(lines) + "\n")  # an interrupted write leaves no half list
    return lines
