"""The front door: one sorted ``__all__`` of at most 40 names, nothing else public, no import cycles."""

from __future__ import annotations

import ast
import importlib
import pathlib
import pkgutil

import interlock

EXPECTED = [
    "Agent",
    "AgentError",
    "AgentInput",
    "AgentOutput",
    "AgentResult",
    "AgentServer",
    "ClaimConflictError",
    "CustomAgent",
    "DataPart",
    "InMemoryStore",
    "Inbox",
    "InterlockError",
    "InterruptedCall",
    "MediaPart",
    "Message",
    "Model",
    "Part",
    "PendingInterrupt",
    "PromptAgent",
    "RemoteAgent",
    "Resume",
    "SQLiteStore",
    "Session",
    "SessionStore",
    "Snapshot",
    "StreamChunk",
    "TextPart",
    "Tool",
    "ToolContext",
    "ToolRequestPart",
    "ToolResponsePart",
    "TurnContext",
    "approve",
    "delegate",
    "deny",
    "interrupt_tool",
    "open_store",
    "resolve_model",
    "tool",
    "tool_approval",
]

PACKAGE = pathlib.Path(interlock.__file__).parent


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(interlock.__path__, "interlock."))


def _is_private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split(".")[1:])


def test_all_is_sorted_pinned_and_small() -> None:
    assert interlock.__all__ == sorted(interlock.__all__)
    assert interlock.__all__ == sorted(EXPECTED)
    assert len(interlock.__all__) <= 40


def test_every_name_is_importable_and_nothing_else_is_public() -> None:
    for name in interlock.__all__:
        assert getattr(interlock, name) is not None
    public = {n for n in vars(interlock) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(interlock, n)).__name__ == "module"}
    assert public - modules == set(interlock.__all__)


def _public_package(module: str) -> str:
    """The nearest public package holding ``module`` (``interlock`` for the private ``_engine``)."""
    parts = module.split(".")
    while len(parts) > 1 and any(part.startswith("_") for part in parts[1:]):
        parts.pop()
    return ".".join(parts)


def test_private_modules_have_no_all_and_their_public_names_have_a_public_door() -> None:
    offenders: list[str] = []
    for name in _modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        if _is_private(name) and hasattr(module, "__all__"):
            offenders.append(f"{name} has __all__")
        for exported in getattr(module, "__all__", []):
            home = getattr(getattr(module, exported), "__module__", None)
            if not (isinstance(home, str) and home.startswith("interlock") and _is_private(home)):
                continue
            door = importlib.import_module(_public_package(home))
            if exported not in getattr(door, "__all__", []):
                offenders.append(f"{name}.{exported} is defined in {home}, which {door.__name__} does not export")
    assert offenders == []


def _imports(path: pathlib.Path, module: str) -> set[str]:
    """The interlock modules ``module`` imports: at load time, inside a function, or for type checking."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Import):
            found |= {a.name for a in sub.names if a.name.startswith("interlock")}
        elif isinstance(sub, ast.ImportFrom):
            base = sub.module or ""
            if sub.level:
                parts = package.split(".")
                parts = parts[: len(parts) - sub.level + 1]
                base = ".".join([*parts, base]) if base else ".".join(parts)
            if not base.startswith("interlock"):
                continue
            for alias in sub.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if _exists(candidate) else base)
    return found - {module}


def _exists(module: str) -> bool:
    rel = pathlib.Path(*module.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()


def _path(module: str) -> pathlib.Path:
    rel = pathlib.Path(*module.split(".")[1:])
    file = (PACKAGE / rel).with_suffix(".py")
    return file if file.exists() else PACKAGE / rel / "__init__.py"


def test_there_are_no_import_cycles() -> None:
    graph = {m: {d for d in _imports(_path(m), m) if _exists(d)} for m in _modules()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append([*stack[stack.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[node] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])
    assert cycles == []
