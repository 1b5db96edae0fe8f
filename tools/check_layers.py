"""Import direction of gnnq: no circle between files, no import from a lower layer to a higher one.

``python -m tools.check_layers [--root gnnq]`` parses every .py file under the package with ``ast``
(imports at module level and inside functions; relative imports resolved), builds the graph of
imports between the package's files, and prints one line per violation:

- ``circle: a -> b -> a``: the files of one strongly connected component (an import circle);
- ``upward: a -> b (layer x below layer y)``: an import from a lower layer to a higher one, by ``LAYERS``.

Exit status 1 when there is any, else 0. Importing a package's ``__init__`` counts as importing that
file. A name held as a "module:attribute" string (the registries) is not an import. An import under
``if TYPE_CHECKING:`` (annotations only, never run) counts for the layers but makes no circle.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# The layers, bottom first: a file may import files of its own package and of the layers below its own.
# Each entry is one layer; names in one entry are packages (or top-level modules) of the same layer,
# which may not import each other unless ALLOWED_SIDEWAYS says so.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "contract", "lifetime"),  # one-line errors; the launcher <-> rank <-> cluster constants; pdeathsig
    ("config",),  # schema, registries, composition, validation of values
    ("track",),  # run records, files, measurement
    ("data",),  # datasets, loaders, partitions
    ("models",),
    ("comm",),  # communicator, halo exchange, codecs
    ("adaptive",),  # AdaQP's bit-width assignment
    ("parallel",),  # full-graph strategies
    ("train",),  # the epoch driver and the trainers
    ("admm",),  # pdADMM-G's trainer
    ("rank",),  # the per-rank entry point torchrun starts
    ("report",),
    ("projection",),  # traced runs replayed on a modelled cluster (gnnq-bench project)
    ("launch",),
    ("bench",),
    ("cli_help",),
    ("cli",),
)
ALLOWED_SIDEWAYS: set[tuple[str, str]] = set()  # (importer, imported) packages of one layer allowed to meet
ROOT_MODULE = ""  # the package's own __init__ (gnnq): importable from anywhere, imports nothing of gnnq


@dataclass(frozen=True)
class Violation:
    kind: str  # "circle" | "upward" | "sideways" | "unplaced"
    line: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.line}"


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under the package directory ``root``."""
    mods = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _imports(tree: ast.AST, type_only: bool = False):
    """(import node, whether it sits under ``if TYPE_CHECKING:``) for every import in ``tree``, functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, type_only
        elif _is_type_checking(node):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), type_only)
        else:
            yield from _imports(node, type_only)


def imported_modules(module: str, path: Path, mods: dict[str, Path]) -> tuple[set[str], set[str]]:
    """The package's modules that ``module`` imports anywhere in its file (``from a import b``: a.b if a file, else a):
    (imported when it runs, imported for annotations only)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found, type_only = set(), set()
    for node, typing_only in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in mods else base for alias in node.names]
        for name in names:
            while name and name not in mods:  # `import a.b.c` of a name inside a module: its module
                name = name.rpartition(".")[0]
            if name and name != module:
                (type_only if typing_only else found).add(name)
    return found, type_only - found


def import_graphs(root: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> the modules it imports when it runs, module -> every module it imports, annotations included)."""
    mods = module_files(root)
    both = {m: imported_modules(m, p, mods) for m, p in mods.items()}
    return {m: run for m, (run, _) in both.items()}, {m: run | typed for m, (run, typed) in both.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan, iterative), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def circle_path(comp: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One circle through the component's first file, for the message (a -> b -> a)."""
    members, start = set(comp), comp[0]
    paths, seen = {start: [start]}, {start}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    return paths[v] + [start]
                if w not in seen:
                    seen.add(w)
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt
    return comp + [start]


def package_of(module: str) -> str:
    """The first name below the package (gnnq.launch.job -> launch, gnnq.cli -> cli, gnnq -> "")."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ROOT_MODULE


def layer_of(package: str) -> int | None:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    return None


def check(root: Path) -> list[Violation]:
    runtime, graph = import_graphs(root)
    found = []
    for comp in circles(runtime):
        path = " -> ".join(circle_path(comp, runtime))
        found.append(Violation("circle", f"{len(comp)} files ({', '.join(comp)}), e.g. {path}"))
    for module in sorted(graph):
        src = package_of(module)
        if src != ROOT_MODULE and layer_of(src) is None:
            found.append(Violation("unplaced", f"{module}: package {src!r} is in no layer of tools/check_layers.py"))
            continue
        for target in sorted(graph[module]):
            dst = package_of(target)
            if dst == src or layer_of(dst) is None:  # within a package; an unplaced target is reported as its own line
                continue
            if src == ROOT_MODULE or dst == ROOT_MODULE:  # the root imports nothing; anything may import it
                if src == ROOT_MODULE:
                    why = "the package root imports nothing of its own"
                    found.append(Violation("upward", f"{module} -> {target} ({why})"))
                continue
            a, b = layer_of(src), layer_of(dst)
            if a < b:
                found.append(Violation("upward", f"{module} -> {target} (layer {src} is below layer {dst})"))
            elif a == b and (src, dst) not in ALLOWED_SIDEWAYS:
                found.append(Violation("sideways", f"{module} -> {target} ({src} and {dst} share a layer)"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("gnnq"), help="the package directory (default: gnnq)")
    args = parser.parse_args(argv)
    if not (args.root / "__init__.py").is_file():
        print(f"check_layers: {args.root} is not a package directory", file=sys.stderr)
        return 2
    violations = check(args.root)
    for v in violations:
        print(v)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
