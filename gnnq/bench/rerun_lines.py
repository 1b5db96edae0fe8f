"""The rerun lines of a benchmark README (``gnnq`` + these reruns it): each row's full overrides against gnnq's
defaults, through the row's own ``experiment=`` preset, checked by composing them (gnnq.report.overrides).

    python -m gnnq.bench.rerun_lines results/... [--fix]

checks every committed README that has such lines against its results.json (each row's config: the sweep file
and the row's overrides, composed as gnnq-bench ran them); ``--fix`` rewrites the lines that differ.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from omegaconf import OmegaConf

from gnnq.config.compose import compose_config, resolve_sweep
from gnnq.report.overrides import composition_differences, config_overrides

SEED = frozenset({"trainer.seed"})
SECTION = "`gnnq` + these reruns it"
LINE = re.compile(r"^- (?P<label>.+?): (?P<runs>.*); `(?P<overrides>[^`]*)`$")


def own_preset(overrides: list[str]) -> str | None:
    """The ``experiment=`` preset among a point's overrides (the last one, as Hydra takes it)."""
    found = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0].lstrip("+~") == "experiment"]
    return found[-1] if found else None


def rerun_overrides(config: dict, preset: str | None) -> list[str]:
    """Overrides that rebuild ``config`` (seed aside): through ``preset`` where that composes to it exactly, else
    through the preset that needs fewest, else through none; the first candidate whose composition is exact."""
    candidates = [config_overrides(config, SEED, preset), config_overrides(config, SEED)]
    for overrides in dict.fromkeys(map(tuple, candidates)):
        if not composition_differences(list(overrides), config, SEED):
            return list(overrides)
    return list(candidates[0])


def set_by_preset(overrides: list[str], preset: str, config: dict) -> list[str]:
    """The overrides of a line that only repeat what ``preset`` sets (its group choices and values)."""
    import yaml

    from gnnq.report.overrides import presets, resolved_value

    made = presets().get(preset)
    if made is None:
        return []
    out = []
    for o in overrides:
        key, _, text = o.partition("=")
        group, _, name = key.partition(".")
        if not name and made.choices.get(group) == text:
            out.append(o)
        elif name in made.values.get(group, {}):
            try:
                value = yaml.safe_load(text)
            except yaml.YAMLError:
                continue
            if resolved_value(made.values[group][name], config) == value:
                out.append(o)
    return out


def row_config(results: dict, row: dict) -> dict:
    """The config the row's runs ran with: its sweep file and its overrides, composed as gnnq-bench runs them."""
    config_dir, name = resolve_sweep(results["sweep"])
    composed = compose_config(list(row["overrides"]), name, config_dir)
    return (
        OmegaConf.to_container(composed, resolve=True, exclude_structured_configs=False)
        if "hydra" not in composed
        else {
            k: OmegaConf.to_container(composed[k], resolve=True) if OmegaConf.is_config(composed[k]) else composed[k]
            for k in composed
            if k != "hydra"
        }
    )


def row_label(row: dict) -> str:
    return " ".join([row["method"], *(f"{k}={v}" for k, v in row["setting"].items())])


def readme_lines(text: str) -> list[tuple[int, re.Match]]:
    """(line index, match) of every rerun line in a README's "Every point" section."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if SECTION in line), None)
    if start is None:
        return []
    out = []
    for i in range(start + 1, len(lines)):
        m = LINE.match(lines[i])
        if m:
            out.append((i, m))
        elif out and not lines[i].strip():
            break
    return out


def check(folder: Path, fix: bool = False) -> list[str]:
    """Problems with ``folder``'s README rerun lines (each line vs its row's config); ``fix``: rewrite them."""
    readme, results_path = folder / "README.md", folder / "results.json"
    results = json.loads(results_path.read_text())
    text = readme.read_text()
    found = readme_lines(text)
    rows = results["rows"]
    if len(found) != len(rows):
        return [f"{readme}: {len(found)} rerun lines for {len(rows)} rows"]
    lines, problems = text.splitlines(), []
    for (i, m), row in zip(found, rows):
        label = row_label(row)
        if m["label"] != label:
            problems.append(f"{readme}:{i + 1}: the line is for {m['label']!r}, the row is {label!r}")
            continue
        config = row_config(results, row)
        given = m["overrides"].split()
        wrong = composition_differences(given, config, SEED)
        preset = own_preset(row["overrides"])
        if preset and f"experiment={preset}" not in given:
            wrong.append(f"it does not name the row's preset experiment={preset}")
        elif preset:
            wrong += [f"{o} is set by experiment={preset} already" for o in set_by_preset(given, preset, config)]
        if wrong:
            problems.append(f"{readme}:{i + 1}: {label}: `{m['overrides']}`: {'; '.join(wrong[:4])}")
            if fix:
                lines[i] = f"- {m['label']}: {m['runs']}; `{' '.join(rerun_overrides(config, preset))}`"
    if fix and problems:
        readme.write_text("\n".join(lines) + ("\n" if text.endswith("\n") else ""))
    return problems


def committed_folders(root: Path) -> list[Path]:
    """Every folder under ``root`` whose README has rerun lines and a results.json beside it."""
    return sorted(
        p.parent for p in root.rglob("README.md") if (p.parent / "results.json").is_file() and SECTION in p.read_text()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gnnq.bench.rerun_lines", description=__doc__)
    parser.add_argument("roots", nargs="+", type=Path, help="folders searched for benchmark READMEs (e.g. results)")
    parser.add_argument("--fix", action="store_true", help="rewrite the lines that do not compose to their row")
    args = parser.parse_args(argv)
    problems = [p for root in args.roots for folder in committed_folders(root) for p in check(folder, args.fix)]
    print("\n".join(problems) if problems else "every rerun line composes to its row's config")
    return 1 if problems and not args.fix else 0


if __name__ == "__main__":
    sys.exit(main())
