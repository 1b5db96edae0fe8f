"""``gnnq --help`` (gnnq's usage, its config groups and the sweeps shipped with it) and ``gnnq --version``."""

from __future__ import annotations

import platform

from gnnq.config.compose import CONF_DIR, SWEEPS_DIR

USAGE = """\
gnnq: distributed full-graph GNN training with quantized halo messages

usage:
  gnnq [GROUP=OPTION ...] [KEY=VALUE ...]      one run (e.g. gnnq dataset=cora model=sage trainer.epochs=50)
  gnnq -m KEY=A,B [KEY=VALUE ...]              a sweep: one run per combination of the comma lists
  gnnq -m sweep=NAME [OVERRIDES ...]           a sweep shipped with gnnq (below), or sweep=path/to/file.yaml
  gnnq -m ... --dry-run                        list a sweep's points and their estimated time; run nothing
  gnnq -m ... hydra.sweep.dir=DIR              run or resume a sweep in DIR (its ok points are skipped)
  gnnq resume=RUN_DIR                          continue a failed or interrupted run from its latest checkpoint
  gnnq [OVERRIDES ...] --cfg job               print the composed config of a run
  gnnq --version | --hydra-help                versions and commit | Hydra's own flags

then: gnnq-report RUNS_DIR [--table NAME] [--out DIR]   tables, leaderboards, plots from the run records
      gnnq-bench NAME [--repeats 3]                     a sweep's points side by side, repeated, against a baseline
docs: README.md, docs/runs.md (runs and sweeps), docs/config.md (every key)
"""


def config_groups() -> dict[str, list[str]]:
    """Each config group (conf/<group>/) and its options."""
    return {d.name: sorted(p.stem for p in d.glob("*.yaml")) for d in sorted(CONF_DIR.iterdir()) if d.is_dir()}


def sweeps() -> dict[str, str]:
    """Each sweep shipped with gnnq and the first line of its description."""
    out = {}
    for path in sorted(SWEEPS_DIR.glob("*.yaml")):
        if path.name.endswith(".table.yaml"):
            continue
        first = next((line.lstrip("# ").strip() for line in path.read_text().splitlines() if line.startswith("#")), "")
        out[path.stem] = first if len(first) <= 100 else first[:97] + "..."
    return out


def help_text() -> str:
    groups = [f"  {group}: {', '.join(options)}" for group, options in config_groups().items()]
    shipped = sweeps()
    width = max(map(len, shipped), default=0)
    sweep_lines = [f"  {name:<{width}}  {text}" for name, text in shipped.items()]
    return "\n".join(
        [
            USAGE,
            "config groups (GROUP=OPTION):",
            *groups,
            "",
            "sweeps (gnnq -m sweep=NAME; gnnq-bench NAME; gnnq-report RUNS_DIR --table NAME where a table exists):",
            *sweep_lines,
        ]
    )


def version_text() -> str:
    from gnnq.track.record import source_state, versions  # torch: only for --version

    v, src = versions(), source_state()
    if src["git_commit"] is None:
        commit = "commit unknown (not a git checkout)"
    else:
        commit = f"commit {src['git_commit'][:12]}" + (" with uncommitted changes" if src["git_dirty"] else "")
    return (
        f"gnnq {v['gnnq']} ({commit}), torch {v['torch']}, hydra-core {v['hydra-core']}, "
        f"Python {platform.python_version()}"
    )
