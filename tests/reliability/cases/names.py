"""Names and numbers (issue 45, cases 13, 14, 16, 17): a run is named by what ran, a number out of range is named
as written with its line and the range allowed, a projection says when its run failed, a printed rerun line reruns
its own row. (Case 15, a bad WANDB_MODE, is ``secrets/unknown-wandb-mode``.)"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.reliability.case import Case, Expect, Outcome
from tests.reliability.cases.common import FAST, OK, failed
from tests.reliability.context import Context

FILES = [a for a in FAST if not a.startswith("dataset.")]


def _named_by_what_ran(ctx: Context, _: Outcome) -> list[str]:
    from omegaconf import OmegaConf

    from gnnq.track.wandb_logger import wandb_run_name

    (run_dir,) = ctx.run_dirs()
    config = ctx.record(run_dir)["config"]
    wandb_name = wandb_run_name(OmegaConf.create(config))
    problems = [] if config["parallel"]["name"] == "stale" else [f"parallel {config['parallel']['name']} ran"]
    if "adaqp_vanilla" in run_dir.name or "stale" not in run_dir.name:
        problems.append(f"the run dir {run_dir.name} is not named by what ran (PipeGCN: stale)")
    if "-stale-" not in wandb_name:
        problems.append(f"the W&B name {wandb_name} does not say stale")
    return problems


def _huge_node_id(ctx: Context) -> None:
    graph = ctx.graph()
    lines = (graph / "edges.txt").read_text().splitlines()
    lines[5] = "3\t100000000000000000000"  # 1e20, an integer beyond int64 (pandas reads an object column)
    (graph / "edges.txt").write_text("\n".join(lines) + "\n")


def _failed_traced_run(ctx: Context) -> None:
    out = ctx.run(
        [*FAST, "trainer.epochs=6", "trainer.trace=true", f"hydra.run.dir={ctx.runs / 'failed'}"],
        {"GNNQ_FAULT_INJECT": "rank=1,epoch=4"},
    )
    if out.proc.returncode != 1:
        raise RuntimeError(f"the traced run ended {out.proc.returncode}, not 1: {out.last_line}")


# --- 17: the README line for adaqp_vanilla_published, composed by gnnq itself ---

BENCH = Path(__file__).resolve().parents[3] / "results" / "adaqp_emulated" / "both_ways" / "hosts2_paired"
ROW = "adaqp_vanilla_published"


def _rerun_line(ctx: Context) -> list[str]:
    from gnnq.bench.rerun_lines import readme_lines

    (line,) = [m["overrides"] for _, m in readme_lines((BENCH / "README.md").read_text()) if m["label"] == ROW]
    return [*line.split(), "--cfg", "job"]


def _composes_to_the_row(ctx: Context, outcome: Outcome) -> list[str]:
    import json

    from gnnq.bench.rerun_lines import row_config

    results = json.loads((BENCH / "results.json").read_text())
    (row,) = [r for r in results["rows"] if r["method"] == ROW]
    want, got = row_config(results, row), yaml.safe_load(outcome.proc.stdout)
    keys = [("quantizer", "name"), ("parallel", "name"), ("parallel", "inputs"), ("model", "layer_order")]
    problems = [
        f"{g}.{k}: {got[g].get(k)!r}, the row ran {want[g][k]!r}" for g, k in keys if got[g].get(k) != want[g][k]
    ]
    line = " ".join(_rerun_line(ctx))
    return problems + ([] if f"experiment={ROW} " in line else [f"the line does not name experiment={ROW}: {line}"])


CASES = [
    Case(
        "names",
        "preset-choice-overridden",
        "experiment=adaqp_vanilla parallel=stale (issue 45.13): runs PipeGCN, its run dir and W&B name say so",
        OK,
        args=["experiment=adaqp_vanilla", "parallel=stale", *FAST],
        verify=_named_by_what_ran,
    ),
    Case(
        "names",
        "node-id-1e20",
        "an edge list with a node id of 1e20 written as an integer (issue 45.14): the value, its line, the range",
        failed(r"edges\.txt refers to node 100000000000000000000 \(line 6\), but .*\(node ids must be 0\.\.39\)"),
        args=lambda ctx: [*FILES, "dataset=files", f"dataset.path={ctx.root / 'graph'}"],
        setup=_huge_node_id,
    ),
    Case(
        "names",
        "project-failed-run",
        "gnnq-bench project of a failed run's trace (issue 45.16): a warning says the run failed",
        Expect(exit=0, warning=r"^gnnq-bench project: warning: .*failed is not a finished run \(it failed: rank 1"),
        args=lambda ctx: ["project", str(ctx.runs / "failed"), "--link-gbit", "1"],
        setup=_failed_traced_run,
        program="gnnq-bench",
    ),
    Case(
        "names",
        "rerun-line-reruns-its-row",
        f"the README line of hosts2_paired's {ROW} row, composed by gnnq --cfg job (issue 45.17): its row's config",
        Expect(exit=0),
        args=_rerun_line,
        verify=_composes_to_the_row,
    ),
]
