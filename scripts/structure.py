"""Print the structure figures issue 26 sets targets for (one engine with visible seams).

    python scripts/structure.py [--quick] [--cycles]

Figures, each with its target: modules at the top of ``src/interlock/`` (≤ 12); import cycles
counting ``TYPE_CHECKING`` imports (0) and without them; methods of the core store Protocol
(≤ 7); ``PromptAgent``'s parameters (≤ 12); public modules (≤ 25); the README's lines (≤ 250)
and the line of its first example (≤ 80). ``--quick`` also runs the unit tier (``make quick``'s
command) and prints its test count and wall time (≥ 500 tests in ≤ 120 s); ``--cycles`` lists the cycles.
"""

from __future__ import annotations

import ast
import inspect
import pathlib
import re
import subprocess
import sys
import time
from typing import Protocol

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "interlock"


def modules() -> dict[str, pathlib.Path]:
    """Every module of the package, by dotted name."""
    found: dict[str, pathlib.Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(path: pathlib.Path, module: str, known: set[str], *, type_checking: bool) -> set[str]:
    """The package's modules ``module`` imports (with or without those under ``if TYPE_CHECKING``)."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skipped: set[int] = set()
    if not type_checking:
        skipped = {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in ast.walk(node)
        }
    found: set[str] = set()
    for sub in ast.walk(tree):
        if id(sub) in skipped:
            continue
        if isinstance(sub, ast.Import):
            found |= {a.name for a in sub.names if a.name in known}
        elif isinstance(sub, ast.ImportFrom):
            base = sub.module or ""
            if sub.level:
                parts = package.split(".")[: len(package.split(".")) - sub.level + 1]
                base = ".".join([*parts, base]) if base else ".".join(parts)
            for alias in sub.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in known else base)
    return (found & known) - {module}


def cycles(*, type_checking: bool) -> list[list[str]]:
    """The import cycles of the package (one per back edge of a depth-first walk)."""
    mods = modules()
    known = set(mods)
    graph = {m: imports(p, m, known, type_checking=type_checking) for m, p in mods.items()}
    found: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                found.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    sys.setrecursionlimit(10_000)
    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


def top_level_modules() -> list[str]:
    """The modules directly under ``src/interlock/`` (``__init__`` and ``__main__`` not counted)."""
    return sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def public_modules() -> list[str]:
    """Modules whose dotted path has no ``_``-prefixed part (the package itself not counted)."""
    return sorted(m for m in modules() if m != "interlock" and not any(p.startswith("_") for p in m.split(".")[1:]))


def protocol_methods(name: str) -> int | None:
    """The methods the store Protocol ``name`` declares (its own and inherited), or ``None`` if absent."""
    import interlock.stores as stores

    found = getattr(stores, name, None)
    if not (inspect.isclass(found) and issubclass(found, Protocol)):
        return None
    names = {
        n
        for klass in found.__mro__
        if klass not in (object, Protocol) and klass.__module__.startswith("interlock")
        for n, v in vars(klass).items()
        if callable(v) and not n.startswith("_")
    }
    return len(names)


def prompt_agent_parameters() -> int:
    """How many parameters ``PromptAgent(...)`` takes."""
    from interlock import PromptAgent

    return len(inspect.signature(PromptAgent).parameters)


def readme() -> tuple[int, int | None]:
    """The README's length and the line its first Python block opens on."""
    lines = (ROOT / "README.md").read_text().splitlines()
    first = next((i + 1 for i, line in enumerate(lines) if re.match(r"^```python\b", line)), None)
    return len(lines), first


def quick() -> tuple[int, float]:
    """Run the unit tier as ``make quick`` does: tests passed and wall seconds."""
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/unit", "-q", "-p", "no:cov", "-p", "no:randomly"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    found = re.search(r"(\d+) passed", done.stdout)
    return (int(found.group(1)) if found else 0), wall


def main() -> None:
    """Print the figures, one per line, with their targets."""
    sys.path.insert(0, str(ROOT / "src"))
    rows: list[tuple[str, str, str]] = []
    top = top_level_modules()
    rows.append(("top-level modules", str(len(top)), "≤ 12"))
    rows.append(("import cycles, TYPE_CHECKING counted", str(len(cycles(type_checking=True))), "0"))
    rows.append(("import cycles, at run time", str(len(cycles(type_checking=False))), "0"))
    core = protocol_methods("SnapshotStore")
    rows.append(("SnapshotStore methods", "absent" if core is None else str(core), "≤ 7"))
    rows.append(("SessionStore methods (all capabilities)", str(protocol_methods("SessionStore")), ""))
    rows.append(("PromptAgent parameters", str(prompt_agent_parameters()), "≤ 12"))
    rows.append(("public modules", str(len(public_modules())), "≤ 25"))
    lines, first = readme()
    rows.append(("README lines", str(lines), "≤ 250"))
    rows.append(("README first example at line", str(first), "≤ 80"))
    if "--quick" in sys.argv:
        count, wall = quick()
        rows.append(("make quick: tests", str(count), "≥ 500"))
        rows.append(("make quick: wall seconds", f"{wall:.0f}", "≤ 120"))
    width = max(len(r[0]) for r in rows)
    for label, value, target in rows:
        print(f"{label.ljust(width)}  {value.rjust(7)}  {target}")
    if "--cycles" in sys.argv:
        for cycle in cycles(type_checking=True):
            print(" -> ".join(cycle))


if __name__ == "__main__":
    main()
