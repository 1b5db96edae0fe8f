"""The last step of a run: rank 0's summary of a job that exited, or a LaunchError naming why it failed."""

from __future__ import annotations

import json
from pathlib import Path

from gnnq.contract import INTERNAL_DIR, RESULT_FILE
from gnnq.errors import LaunchError
from gnnq.launch.failure import describe_failure


def collect_result(
    run_dir: Path, code: int, logs: list[Path], ranks_per_log: int = 0, exits: dict[int, int] | None = None
) -> dict:
    """Rank 0's summary of a job that exited with ``code``; a LaunchError naming the cause if it failed.

    ``exits``: ranks' exit codes the launcher saw itself (a warm pool's; torchrun's are in its log)."""
    if code != 0:
        raise LaunchError(describe_failure(run_dir, code, logs, ranks_per_log, exits))
    result = run_dir / INTERNAL_DIR / RESULT_FILE
    if not result.is_file():
        raise LaunchError(f"torchrun exited 0 but rank 0 left no result (see {logs[0]})")
    return json.loads(result.read_text())
