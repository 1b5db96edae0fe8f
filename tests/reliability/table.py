"""results.json and README.md of a catalogue run: per case expected vs observed, totals per family and overall."""

from __future__ import annotations

import json
from pathlib import Path

from gnnq.track.progress import markdown_table

COUNTS = ("records_lost", "orphans", "secrets_written")


def totals(results: list[dict]) -> dict:
    """Per family and overall: cases, passed, failed, skipped, records lost, orphans, secrets written, seconds."""

    def tally(rows: list[dict]) -> dict:
        out = {
            "cases": len(rows),
            "pass": sum(r["result"] == "pass" for r in rows),
            "fail": sum(r["result"] == "FAIL" for r in rows),
            "skip": sum(r["result"] == "skip" for r in rows),
            "seconds": round(sum(r["seconds"] for r in rows), 1),
        }
        out.update({k: sum(r[k] for r in rows) for k in COUNTS})
        return out

    families = list(dict.fromkeys(r["family"] for r in results))
    return {
        "families": {f: tally([r for r in results if r["family"] == f]) for f in families},
        "overall": tally(results),
    }


FORMER_MODULE = "gnnq.bench.reliability"  # the catalogue's module before it moved to tests/reliability/


def _former_name_note(commands: list[str]) -> list[str]:
    """A line saying why some commands name the catalogue's former module (they ran the same catalogue), if any do."""
    if not any(f"-m {FORMER_MODULE} " in f"{c} " for c in commands):
        return []
    return [
        f"The module was renamed: lines naming `{FORMER_MODULE}` ran this catalogue when it was part of the package; "
        "today the same command is `python -m tests.reliability` (same options), "
        "and `pytest -m catalogue tests/reliability` runs every case as a test.",
        "",
    ]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write(out: Path, results: list[dict], commands: list[str], machine: dict) -> dict:
    """Write both files; ``commands``: the command that ran the catalogue, then any that reran some of its cases."""
    out.mkdir(parents=True, exist_ok=True)
    summary = totals(results)
    (out / "results.json").write_text(
        json.dumps({"commands": commands, "machine": machine, "totals": summary, "cases": results}, indent=1) + "\n"
    )
    overall = summary["overall"]
    rate = 100.0 * overall["pass"] / max(1, overall["cases"] - overall["skip"])
    heads = [
        "family",
        "cases",
        "pass",
        "FAIL",
        "skip",
        "records lost",
        "orphan processes",
        "secrets written",
        "seconds",
    ]
    rows = [
        [
            f,
            t["cases"],
            t["pass"],
            t["fail"],
            t["skip"],
            t["records_lost"],
            t["orphans"],
            t["secrets_written"],
            t["seconds"],
        ]
        for f, t in [*summary["families"].items(), ("**all**", overall)]
    ]
    case_rows = [
        [
            r["family"],
            r["case"],
            _cell(r["what"]),
            _cell(r["expected"]),
            _cell(r["observed"]),
            r["result"] + ("".join(f"<br>{_cell(p)}" for p in r["problems"]) if r["problems"] else ""),
            r["seconds"],
        ]
        for r in results
    ]
    failed = [r for r in results if r["result"] == "FAIL"]
    text = [
        "# Reliability catalogue",
        "",
        "Bad data, bad places, faults and resource cases, each through the real `gnnq` command line in its own "
        "temporary "
        "directory (the code: `tests/reliability/`; what each kind of failure looks like: "
        "[docs/runs.md](../../docs/runs.md#what-each-kind-of-failure-looks-like)). After every case: records "
        "that existed before must be byte-identical "
        "(records lost), no process of the case may be alive 10 s after it ended (orphan processes), and the fake "
        "`WANDB_API_KEY` planted in its environment must be in no file under its directory and not in its output "
        "(secrets written).",
        "",
        "```bash",
        *commands,
        "```",
        "",
        *_former_name_note(commands),
        "Machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()) + ".",
        "",
        f"**{overall['pass']} of {overall['cases'] - overall['skip']} cases pass ({rate:.1f}%)**, "
        f"{overall['records_lost']} records lost, "
        f"{overall['orphans']} orphan processes, {overall['secrets_written']} secrets written "
        f"({overall['skip']} skipped; {overall['seconds'] / 60:.1f} min).",
        "",
        markdown_table(heads, rows),
        "",
    ]
    if failed:
        text += (
            ["## Failing cases", ""]
            + [f"- `{r['family']}/{r['case']}`: {'; '.join(r['problems'])}" for r in failed]
            + [""]
        )
    text += [
        "## Every case",
        "",
        markdown_table(["family", "case", "what", "expected", "observed", "result", "s"], case_rows),
        "",
    ]
    (out / "README.md").write_text("\n".join(text))
    return summary
