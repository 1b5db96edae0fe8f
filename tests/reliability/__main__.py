"""``python -m tests.reliability``: run the catalogue (or the cases --only selects), write the table."""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from benchmarks.gnnq_runs import command_line
from gnnq.bench.machine import describe_machine
from tests.reliability import table
from tests.reliability.cases import catalogue, select
from tests.reliability.runner import run_catalogue


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability", description=__doc__)
    parser.add_argument(
        "--out", type=Path, default=Path("results/reliability"), help="where results.json and README.md go"
    )
    parser.add_argument("--only", metavar="REGEX", help="run only the cases whose family/name matches")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--keep", action="store_true", help="keep each case's temporary directory")
    parser.add_argument(
        "--update",
        action="store_true",
        help="rerun only the selected cases and replace their rows in OUT/results.json (the other rows stay)",
    )
    parser.add_argument(
        "--tmp", type=Path, default=None, help="where the cases' temporary directories go (default: TMPDIR)"
    )
    args = parser.parse_args(argv)
    signal.signal(
        signal.SIGTERM, _stop
    )  # a stopped catalogue still unmounts, ends its case's processes, removes its dirs
    cases = select(args.only)
    if not cases:
        print(f"gnnq: error: --only {args.only}: no case matches; --list shows them", file=sys.stderr)
        return 2
    if args.list:
        for case in cases:
            print(f"{case.id:45s} {case.what}")
        return 0
    args.tmp and args.tmp.mkdir(parents=True, exist_ok=True)
    parent = Path(tempfile.mkdtemp(prefix="gnnq-reliability-", dir=args.tmp))
    try:
        results = run_catalogue(cases, parent, keep=args.keep)
    finally:
        if args.keep:
            print(f"[reliability] the cases' directories are kept in {parent} (mounts undone)")
        else:
            shutil.rmtree(parent, ignore_errors=True)
    commands = [command_line("tests.reliability", argv)]
    if args.update:
        results, commands = _merged(args.out / "results.json", results, commands)
    summary = table.write(args.out, results, commands, describe_machine())
    o = summary["overall"]
    print(
        f"[reliability] {o['pass']}/{o['cases'] - o['skip']} pass, {o['fail']} FAIL, {o['skip']} skipped; "
        f"{o['records_lost']} records lost, "
        f"{o['orphans']} orphan processes, {o['secrets_written']} secrets written -> {args.out / 'README.md'}"
    )
    return 0 if o["fail"] == 0 else 1


def _stop(signum, frame):
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _merged(path: Path, rerun: list[dict], commands: list[str]) -> tuple[list[dict], list[str]]:
    """The rows of an earlier run at ``path`` with the rerun cases' rows replaced, in catalogue order (rows of
    cases no longer in the catalogue left out)."""
    if not path.is_file():
        raise SystemExit(f"gnnq: error: --update: {path} does not exist; run the catalogue without --update first")
    earlier = json.loads(path.read_text())
    rows = {(r["family"], r["case"]): r for r in earlier["cases"]}
    rows.update({(r["family"], r["case"]): r for r in rerun})
    order = {(c.family, c.name): i for i, c in enumerate(catalogue())}
    merged = sorted((r for key, r in rows.items() if key in order), key=lambda r: order[(r["family"], r["case"])])
    return merged, [*earlier["commands"], *commands]


if __name__ == "__main__":
    sys.exit(main())
