"""The house's numbers, read from the code itself (issue 40): ``python -m tools.house_metrics [--root gnnq]``.

- **walk**: follow ``cfg`` from ``gnnq/launch/job.py:run_job``. Depth first, every call whose arguments mention the
  name ``cfg`` (``cfg``, ``cfg.cluster``, ...) and that resolves through the file's imports (or its own functions)
  to a function of the package is followed, each function once. A room is a file. The walk moves into a file when a
  call enters it (an *entry*) and moves back when that call returns to the caller's file (a *return*). A *climb
  back up* is a call into a file the walk has already been in (not a return). Printed: rooms entered, climbs back,
  returns, the most entries of one room by calls into it, the most times the walk is in one room counting returns
  too (a pipeline's driver is in its room once more after each step it calls), and the bounces between packages.
- **names**: comparisons (``==``, ``!=``, ``in``, ``not in``) of a string constant (or a module-level name bound
  to one) that is a cluster or method name
  (the choices under conf/cluster, conf/parallel, conf/model, conf/quantizer) with anything, outside the registries
  (gnnq/config/registry.py, gnnq/config/method_checks.py, gnnq/launch/clusters/): their count and the files they are in.
- **products**: lines writing ``nproc * hosts`` out (one ``world_size(cfg)`` should say it).
- **long**: functions longer than 50 lines (their source span, decorators excluded).
- **duplicates**: the pairs ``duplicates --repo gnnq --most 200`` lists.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tools.check_layers import module_files, package_of

START = ("gnnq.launch.job", "run_job")
REGISTRIES = ("gnnq/config/registry.py", "gnnq/config/method_checks.py", "gnnq/launch/clusters/")
LONG = 50


def _functions(tree: ast.AST) -> dict[str, ast.FunctionDef]:
    """Top-level functions and methods (as Class.method) of a module."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out[f"{node.name}.{sub.name}"] = sub
    return out


def _aliases(module: str, path: Path, tree: ast.AST, mods: dict[str, Path]) -> dict[str, str]:
    """Local name -> "module" (a module of the package) or "module:function", from every import in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            for alias in node.names:
                local = alias.asname or alias.name
                if f"{base}.{alias.name}" in mods:
                    out[local] = f"{base}.{alias.name}"
                elif base in mods:
                    out[local] = f"{base}:{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in mods and alias.asname:
                    out[alias.asname] = alias.name
    return out


class Code:
    def __init__(self, root: Path):
        self.mods = module_files(root)
        self.trees = {m: ast.parse(p.read_text(), str(p)) for m, p in self.mods.items()}
        self.funcs = {m: _functions(t) for m, t in self.trees.items()}
        self.aliases = {m: _aliases(m, self.mods[m], t, self.mods) for m, t in self.trees.items()}

    def resolve(self, module: str, call: ast.Call) -> tuple[str, str] | None:
        f, aliases = call.func, self.aliases[module]
        if isinstance(f, ast.Name):
            if f.id in self.funcs[module]:
                return module, f.id
            target = aliases.get(f.id, "")
            if ":" in target:
                mod, name = target.split(":")
                return self._follow(mod, name)
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            target = aliases.get(f.value.id, "")
            if target and ":" not in target:
                return self._follow(target, f.attr)
            if ":" in target:  # a class imported by name: Class.method(...)
                mod, cls = target.split(":")
                if f"{cls}.{f.attr}" in self.funcs.get(mod, {}):
                    return mod, f"{cls}.{f.attr}"
        return None

    def _follow(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        """A function found in ``module``, or re-exported by it from another module of the package."""
        if name in self.funcs.get(module, {}):
            return module, name
        target = self.aliases.get(module, {}).get(name, "")
        if ":" in target and depth < 5:
            return self._follow(*target.split(":"), depth + 1)
        return None


def _mentions_cfg(call: ast.Call) -> bool:
    args = [*call.args, *(k.value for k in call.keywords)]
    return any(isinstance(n, ast.Name) and n.id == "cfg" for a in args for n in ast.walk(a))


def walk(code: Code, start=START) -> dict:
    """The walk of ``cfg`` from ``start`` (see the module docstring)."""
    seen: set[tuple[str, str]] = set()
    path: list[str] = []  # the files in the order the walk is in them
    kinds: list[str] = []  # "call" or "return" for each move

    def visit(fn: tuple[str, str]) -> None:
        seen.add(fn)
        module, name = fn
        node = code.funcs[module][name]
        calls = sorted(
            (c for c in ast.walk(node) if isinstance(c, ast.Call) and _mentions_cfg(c)),
            key=lambda c: (c.lineno, c.col_offset),
        )
        for call in calls:
            target = code.resolve(module, call)
            if target is None or target in seen:
                continue
            if target[0] != module:
                path.append(target[0])
                kinds.append("call")
            visit(target)
            if target[0] != module:
                path.append(module)
                kinds.append("return")

    path.append(start[0])
    kinds.append("start")
    visit(start)
    entries = Counter(path)
    calls_into = Counter(room for room, kind in zip(path, kinds) if kind != "return")
    climbs, been = 0, set()
    for room, kind in zip(path, kinds):
        if kind == "call" and room in been:
            climbs += 1
        been.add(room)
    bounces = Counter()
    for a, b in zip(path, path[1:]):
        pa, pb = package_of(a), package_of(b)
        if pa != pb:
            bounces["<->".join(sorted((pa, pb)))] += 1
    return {
        "rooms": len(entries),
        "climbs_back": climbs,
        "returns": kinds.count("return"),
        "most_entries": calls_into.most_common(3),
        "most_times_in": entries.most_common(3),
        "bounces": bounces.most_common(4),
        "functions": len(seen),
    }


def choice_names(conf: Path, groups=("cluster", "parallel", "model", "quantizer")) -> set[str]:
    return {p.stem for group in groups for p in (conf / group).glob("*.yaml")}


def _str_consts(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound to a string constant (``STALE = "stale"``, ``A, B = "a", "b"``)."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and _str_consts(node.value) and isinstance(node.value, ast.Constant):
                    out[target.id] = node.value.value
                elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for t, v in zip(target.elts, node.value.elts):
                        if isinstance(t, ast.Name) and isinstance(v, ast.Constant) and isinstance(v.value, str):
                            out[t.id] = v.value
    return out


def name_comparisons(root: Path, names: set[str]) -> list[tuple[str, int, str]]:
    """(file, line, name) of every comparison with a choice's name, outside the registries."""
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.as_posix()
        if any(rel.endswith(r) or r in rel for r in REGISTRIES):
            continue
        tree = ast.parse(path.read_text(), str(path))
        named = _module_strings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                sides = (node.left, *node.comparators)
                consts = [s for side in sides for s in _str_consts(side)]
                consts += [named[side.id] for side in sides if isinstance(side, ast.Name) and side.id in named]
                for s in consts:
                    if s in names:
                        found.append((rel, node.lineno, s))
                        break
    return found


def world_size_products(root: Path) -> list[tuple[str, int]]:
    """(file, line) of every ``nproc * hosts`` (either order) written out instead of calling world_size."""
    pattern = re.compile(r"nproc\s*\*\s*\S*hosts|hosts\s*\*\s*\S*nproc")
    return [
        (p.as_posix(), i)
        for p in sorted(root.rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]


def long_functions(root: Path, limit: int = LONG) -> list[tuple[str, str, int]]:
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > limit:
                    out.append((path.as_posix(), node.name, n))
    return sorted(out, key=lambda r: -r[2])


def duplicate_pairs(root: Path) -> int | None:
    """How many pairs ``duplicates`` lists under ``root`` (None: the tool is not installed)."""
    if shutil.which("duplicates") is None:
        return None
    out = subprocess.run(
        ["duplicates", "--repo", str(root), "--most", "200", "--seconds", "120"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    found = re.search(r"^(\d+) pairs of places", out, re.M)
    return int(found.group(1)) if found else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("gnnq"))
    parser.add_argument("--conf", type=Path, default=Path("conf"))
    parser.add_argument("--no-duplicates", action="store_true", help="skip the duplicates count (slow)")
    args = parser.parse_args(argv)
    w = walk(Code(args.root))
    print(
        f"walk of cfg from run_job: {w['rooms']} rooms, {w['climbs_back']} climbs back, {w['returns']} returns "
        f"({w['functions']} functions); most entries by calls {w['most_entries']}; most times in, with returns "
        f"{w['most_times_in']}; bounces {w['bounces']}"
    )
    found = name_comparisons(args.root, choice_names(args.conf))
    clusters = choice_names(args.conf, ("cluster",))
    for what, rows in (
        ("cluster", [r for r in found if r[2] in clusters]),
        ("method", [r for r in found if r[2] not in clusters]),
    ):
        print(f"{what} name comparisons outside the registries: {len(rows)} in {len({f for f, _, _ in rows})} files")
    for f, line, s in found:
        print(f"  {f}:{line}: {s!r}")
    products = world_size_products(args.root)
    print(f"nproc * hosts written out: {len(products)} in {len({f for f, _ in products})} files")
    longs = long_functions(args.root)
    print(f"functions over {LONG} lines: {len(longs)}")
    for f, name, n in longs:
        print(f"  {f}:{name} {n}")
    if not args.no_duplicates:
        print(f"duplicates pairs in {args.root}: {duplicate_pairs(args.root)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
