"""pdADMM-G / pdADMM-G-Q: Table IV, bytes per iteration, and time per iteration by rank count.

    python -m benchmarks.admm --data DIR --out results/admm [--runs DIR...] [--bytes-runs DIR...]
        [--timing-iterations 20] [--table table4]

1. Table IV: the runs of ``sweeps/table4.yaml`` (pdADMM-G, pdADMM-G-Q, GD, Adam, Adagrad,
   Adadelta on the same GA-MLP; Cora and CiteSeer; 5 seeds), run here unless ``--runs`` names
   directories that already hold them, rendered through ``sweeps/table4.table.yaml`` beside
   the paper's numbers (Markdown, CSV, LaTeX), and one line per run (final and best-validation test,
   the best test of any iteration, the last rho). ``--table table4_published`` renders the authors' presets
   with the authors' options beside the same presets with gnnq's (sweeps/table4_published.table.yaml).
2. Bytes per iteration of pdADMM-G-Q against pdADMM-G (from the same runs, or ``--bytes-runs``) with the
   accuracy cost; runs on one rank send nothing and are left out.
3. Time per iteration of the paper's network (10 layers of 500) on Cora with 1, 2 and 4 ranks,
   pdADMM-G and -Q: short runs without warm-up or evaluation, medians over iterations, one
   intra-op thread per rank (the output says when there are more ranks than cores);
   ``--timing-iterations 0`` skips it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from benchmarks.gnnq_runs import command_line, run_gnnq
from gnnq.bench.machine import describe_machine
from gnnq.config.compose import SWEEPS_DIR
from gnnq.report.summary import find_records
from gnnq.report.tables import load_spec, render_all
from gnnq.track.progress import markdown_table

SWEEPS = SWEEPS_DIR
METHODS = {"pdADMM-G": "pdadmm_g", "pdADMM-G-Q": "pdadmm_g_q_gnnq"}
PAPER_PRESETS = "pdadmm_g_paper,pdadmm_g_q_paper,pdadmm_g_q_code"
# The authors' per-dataset values (pdADMM_G_{2,5,10}_layer.py) as overrides of the pdadmm_g_paper presets,
# whose own values are Cora's.
PAPER_RATES = {
    "cora": [],
    "citeseer": ["parallel.rho=1e-3", "parallel.chain_mu=[10,0.1]"],
    "pubmed": ["parallel.rho=1e-4", "parallel.chain_mu=[0.1,0.1]"],
    "amazon-computers": [
        "parallel.rho=1e-3",
        "trainer.weight_decay=0.001",
        "parallel.chain_rho=[1e-3,1e-3]",
        "parallel.chain_mu=[1,1]",
    ],
    "amazon-photo": [
        "parallel.rho=1e-3",
        "trainer.weight_decay=0.001",
        "parallel.chain_rho=[1e-3,1e-3]",
        "parallel.chain_mu=[1,1]",
    ],
    "coauthor-cs": ["parallel.rho=1e-2", "parallel.chain_mu=[10,0.1]"],
    "coauthor-physics": ["parallel.rho=1e-2", "parallel.chain_mu=[10,10]"],
}
# Table IV's datasets with the files each needs under the data root (absent: "no data").
TABLE4_FILES = {
    "cora": "Cora/raw/ind.cora.graph",
    "citeseer": "CiteSeer/raw/ind.citeseer.graph",
    "pubmed": "PubMed/raw/ind.pubmed.graph",
    "amazon-computers": "Computers/raw/amazon_electronics_computers.npz",
    "amazon-photo": "Photo/raw/amazon_electronics_photo.npz",
    "coauthor-cs": "CS/raw/ms_academic_cs.npz",
    "coauthor-physics": "Physics/raw/ms_academic_phy.npz",
    "flickr": "Flickr/raw/adj_full.npz",
    "ogbn-arxiv": "ogbn_arxiv/raw/edge.csv.gz",
}


def present_datasets(data: Path) -> list[str]:
    return [name for name, rel in TABLE4_FILES.items() if (data / rel).is_file()]


def table4_records(data: Path, runs: list[Path] | None, work: Path, seeds: str) -> list[tuple[Path, dict]]:
    """(run directory, record) of every run of Table IV: gnnq's presets and the baselines (sweeps/table4.yaml) and the
    authors'
    presets with their per-dataset values, on every dataset whose files are present."""
    if not runs:
        runs = []
        for dataset in present_datasets(data):
            runs.append(work / f"table4-{dataset}")
            run_gnnq(
                [
                    "-m",
                    "--config-dir",
                    str(SWEEPS),
                    "--config-name",
                    "table4",
                    f"dataset={dataset}",
                    f"trainer.seed={seeds}",
                ],
                data,
                runs[-1],
            )
            if dataset in PAPER_RATES:
                runs.append(work / f"paper-{dataset}")
                run_gnnq(
                    [
                        "-m",
                        f"experiment={PAPER_PRESETS}",
                        f"dataset={dataset}",
                        f"trainer.seed={seeds}",
                        "cluster.nproc=2",
                        "logger=none",
                        *PAPER_RATES[dataset],
                    ],
                    data,
                    runs[-1],
                )
    return find_records(runs)[0]


def coverage_rows(data: Path, records: list[dict]) -> list[dict]:
    """Per Table IV dataset: how many runs the table holds, or "no data" where its files are absent."""
    present = set(present_datasets(data))
    rows = []
    for name, rel in TABLE4_FILES.items():
        n = sum(1 for r in records if r["config"]["dataset"]["name"] == name and r["status"] == "ok")
        rows.append({"dataset": name, "runs": n if (n or name in present) else "no data", "file": rel})
    return rows


def messages(record: dict) -> str:
    """What a pdADMM-G record sends: fp32, or which of p and q go on which grid."""
    q = record["config"]["quantizer"]
    if q["name"] != "grid":
        return "fp32"
    sent = [v for v, on in (("p", q.get("quantize_p", True)), ("q", q["quantize_q"])) if on]
    return f"{' and '.join(sent)} on {q['grid_levels']} levels in [{q['grid_min']:g}, {q['grid_max']:g}]"


def options(pcfg: dict) -> str:
    """Whose updates and schedule a pdADMM-G run used: the authors' (the paper presets' options) or gnnq's."""
    z = pcfg.get("z_out", "gnnq")
    return f"{z}, {pcfg.get('rho_schedule', 'none')}" + (", Q chain" if pcfg.get("chain_quantize") else "")


def _saved(sent: float, baseline: int | None) -> str:
    return "-" if not baseline else f"{1 - sent / baseline:.1%}"


def byte_rows(records: list[dict]) -> list[dict]:
    """Per dataset and message kind: mean bytes per iteration and the bytes saved against both fp32
    baselines on the same boundaries (gnnq's 2 messages per boundary, the public code's 3: q, u, p),
    read from each record's summary, beside the test accuracy (best validation and final iteration).
    Runs on one rank (no boundary, nothing sent) are left out."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        if r["status"] == "ok" and r["config"]["parallel"]["name"] == "admm" and r["config"]["cluster"]["nproc"] > 1:
            init = r["config"]["parallel"].get("init", "warmup2")
            groups.setdefault((r["config"]["dataset"]["name"], init, messages(r)), []).append(r)
    rows = []
    for (dataset, init, sent_as), runs in sorted(groups.items()):
        sent = statistics.mean(r["comm_bytes_per_epoch"] for r in runs)
        base = (runs[0].get("summary", {}).get("admm") or {}).get("fp32_baseline_bytes_per_iteration") or {}
        finals = [r["summary"]["final_test"] for r in runs if r.get("summary", {}).get("final_test") is not None]
        rows.append(
            {
                "dataset": dataset,
                "init": init,
                "messages": sent_as,
                "runs": len(runs),
                "bytes / iter": f"{sent:,.0f}",
                "saved vs gnnq fp32 (2 msgs)": _saved(sent, base.get("gnnq_fp32")),
                "saved vs public code fp32 (3 msgs)": _saved(sent, base.get("public_code_fp32")),
                "test (best val)": f"{statistics.mean(r['test'] for r in runs):.4f}",
                "test (final)": f"{statistics.mean(finals):.4f}" if finals else "-",
            }
        )
    return rows


def run_rows(run_dirs: list[Path]) -> list[dict]:
    """One line per pdADMM-G run directory: the test at the final iteration (what the authors report)
    and at the best validation iteration, the best test of any evaluated iteration (how far the final
    one is from it) and the last rho, read from its record.json and metrics.jsonl."""
    rows = []
    for run in sorted(run_dirs, key=str):
        rec = json.loads((run / "record.json").read_text())
        cfg = rec["config"]
        if cfg["parallel"]["name"] != "admm":
            continue
        epochs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
        tests = [e["test"] for e in epochs if e.get("test") is not None]
        s = rec.get("summary") or {}
        rows.append(
            {
                "dataset": cfg["dataset"]["name"],
                "messages": messages(rec),
                "init": cfg["parallel"].get("init", "warmup2"),
                "options": options(cfg["parallel"]),
                "seed": cfg["trainer"]["seed"],
                "iterations done": len(epochs),
                "status": rec["status"],
                "test final": s.get("final_test", "-"),
                "test best-val": rec.get("test", "-"),
                "best-val iteration": s.get("best_epoch", "-"),
                "peak test": max(tests, default="-"),
                "final rho": epochs[-1].get("rho", "-") if epochs else "-",
            }
        )
    return rows


def timing_rows(data: Path, work: Path, iterations: int) -> list[dict]:
    rows, base = [], {}
    if iterations <= 0:
        return rows
    for ranks in (1, 2, 4):
        for label, preset in METHODS.items():
            args = [
                f"experiment={preset}",
                "dataset=cora",
                f"cluster.nproc={ranks}",
                f"trainer.epochs={iterations}",
                f"trainer.eval_every={iterations}",
                "parallel.warmup_iterations=0",
                "cluster.threads_per_rank=1",
                "logger=none",
            ]
            (rec,) = run_gnnq(args, data, work / f"timing-{preset}-{ranks}")
            s = rec["summary"]
            base.setdefault(label, s["epoch_time_s"])
            rows.append(
                {
                    "method": label,
                    "ranks": ranks,
                    "ms / iteration": f"{1000 * s['epoch_time_s']:.1f}",
                    "vs 1 rank": f"{s['epoch_time_s'] / base[label]:.2f}",
                    "exposed comm ms": f"{1000 * s['comm_time_s']:.1f}",
                    "bytes / iteration": f"{s['comm_bytes_per_epoch']:,}",
                }
            )
    return rows


def _md(rows: list[dict]) -> str:
    return markdown_table(list(rows[0]), [list(r.values()) for r in rows]) if rows else "(no runs)"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="data root holding Cora/ and CiteSeer/")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--runs",
        type=Path,
        nargs="+",
        default=None,
        help="directories holding the runs of sweeps/table4.yaml (skip running them)",
    )
    parser.add_argument(
        "--bytes-runs",
        type=Path,
        nargs="+",
        default=None,
        help="directories holding the multi-rank runs whose bytes the byte table compares (default: the Table IV runs)",
    )
    parser.add_argument(
        "--timing-iterations", type=int, default=20, help="iterations of each timing run; 0 skips the timing table"
    )
    parser.add_argument("--seeds", default="0,1,2,3,4", help="trainer.seed values of the Table IV runs")
    parser.add_argument("--table", default="table4", help="table spec under sweeps/ (NAME.table.yaml) to render")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        found = table4_records(args.data, args.runs, work, args.seeds)
        records = [r for _, r in found]
        coverage = coverage_rows(args.data, records)
        table_md, _ = render_all(load_spec(SWEEPS / f"{args.table}.table.yaml"), records, args.out)
        runs = run_rows([run_dir for run_dir, _ in found])
        bytes_table = byte_rows(
            records if args.bytes_runs is None else [r for _, r in find_records(args.bytes_runs)[0]]
        )
        timing = timing_rows(args.data, work, args.timing_iterations)
    machine = describe_machine()
    results = {"runs": runs, "bytes": bytes_table, "timing": timing, "coverage": coverage, "machine": machine}
    (args.out / "results.json").write_text(json.dumps(results, indent=1))
    text = [
        "# pdADMM-G and pdADMM-G-Q",
        "",
        f"Command: `{command_line('benchmarks.admm', argv)}`",
        "",
        f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, torch {machine.get('torch', '?')}.",
        "",
        "## Table IV (test accuracy at the final iteration, as the authors report it, and at the best validation "
        "iteration; 10 layers of 500, 4 hops; mean ± std over seeds)",
        "",
        table_md,
        "",
        "Per run ('test final': what the authors report; 'peak test': the best test of any evaluated iteration):",
        "",
        _md(runs),
        "",
        "Table IV's datasets here ('no data': its files are not under --data):",
        "",
        _md(coverage),
        "",
        "## Bytes per iteration against both fp32 baselines (gnnq: p down and q up per boundary; the public "
        "code: q, u and p)",
        "",
        _md(bytes_table),
        "",
        *(
            [
                f"## Time per iteration on Cora, 10 layers of 500 ({args.timing_iterations} iterations, medians, "
                "1 thread per rank)",
                "",
                _md(timing),
                "",
                *(
                    [f"4 ranks ran on {machine['cores']} cores, so ranks shared cores there."]
                    if (machine.get("cores") or 0) < 4
                    else []
                ),
            ]
            if timing
            else []
        ),
        "",
    ]
    (args.out / "README.md").write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    main()
