"""One owner for snapshot state: no store updater is written outside :mod:`interlock.records.snapshots`.

Every change of a stored snapshot (its status, its claim, its heartbeat and marks) is a named
function of that module, so "where is a snapshot written, and how" has one answer. This scan
of the package's sources finds what would be a second owner: a function shaped like an
updater (one ``Snapshot | None`` parameter, a snapshot returned), or a lambda given to
``save`` / ``save_all`` / a worker queue's ``write``, kept in an ``Updater``-typed value, or
returned as an ``Updater``. The stores run updaters (their internals are exempt), and the
store conformance kit (``interlock.testing``) writes arbitrary rows on purpose.
"""

from __future__ import annotations

import ast
import pathlib
import re

import interlock

PACKAGE = pathlib.Path(interlock.__file__).parent
OWNER = pathlib.Path("records/snapshots.py")
EXEMPT = (pathlib.Path("stores"), pathlib.Path("testing"))
UPDATER = re.compile(r"\bUpdater\b")
WRITES = {"save": (1, "update"), "save_all": (0, "updates"), "write": (1, "updates")}
"""The store calls that take updaters: the position and keyword of their updater argument."""


def updater_sites(package: pathlib.Path) -> list[str]:
    """``path:line what`` of every updater written in ``package`` outside the owner module."""
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel == OWNER or any(rel.is_relative_to(p) for p in EXEMPT):
            continue
        tree = ast.parse(path.read_text(), str(path))
        found += [f"{rel}:{line} {what}" for line, what in _sites(tree)]
    return found


def _sites(tree: ast.AST) -> list[tuple[int, str]]:
    sites: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _updater_shaped(node):
            sites.append((node.lineno, f"def {node.name}"))
        for held in _lambda_holders(node):
            sites += [(sub.lineno, "lambda") for sub in ast.walk(held) if isinstance(sub, ast.Lambda)]
    return sorted(set(sites))


def _updater_shaped(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """One parameter, typed ``Snapshot | None``, and a snapshot returned: the shape of a store updater."""
    params = [a for a in node.args.args if a.arg != "self"]
    takes = len(params) == 1 and params[0].annotation is not None and _is_optional_snapshot(params[0].annotation)
    returns = node.returns is not None and ast.unparse(node.returns) in ("Snapshot | None", "Snapshot")
    return takes and returns


def _is_optional_snapshot(annotation: ast.expr) -> bool:
    return ast.unparse(annotation).replace("'", "") in ("Snapshot | None", "None | Snapshot", "Optional[Snapshot]")


def _lambda_holders(node: ast.AST) -> list[ast.AST]:
    """The parts of ``node`` whose lambdas would be updaters."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITES:
        position, keyword = WRITES[node.func.attr]
        held: list[ast.AST] = [k.value for k in node.keywords if k.arg == keyword]
        return held + node.args[position : position + 1]
    if isinstance(node, ast.AnnAssign) and node.value is not None and UPDATER.search(ast.unparse(node.annotation)):
        return [node.value]
    if (
        isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.returns is not None
        and UPDATER.search(ast.unparse(node.returns))
    ):
        return [*node.body]
    return []


def test_no_updater_is_written_outside_the_owner_module() -> None:
    assert updater_sites(PACKAGE) == []


def test_the_scan_finds_each_shape_of_updater(tmp_path: pathlib.Path) -> None:
    (tmp_path / "mod.py").write_text(
        "def mark(cur: Snapshot | None) -> Snapshot | None:\n"
        "    return cur\n"
        "class Take:\n"
        "    def __call__(self, cur: 'Snapshot | None') -> Snapshot:\n"
        "        return cur\n"
        "async def go(store, snap):\n"
        "    await store.save('a', lambda _: snap)\n"
        "    await store.save_all([('a', lambda cur: cur)], journal=[('k', lambda cur: cur)])\n"
        "    await queue.write(store, updates=[('a', lambda cur: cur)], snapshot_id='a', tenant=None)\n"
        "    writes: list[tuple[str, Updater]] = [('a', lambda _: snap)]\n"
        "def fenced(update) -> Updater:\n"
        "    return lambda cur: update(cur)\n"
        "def journal(update) -> JournalUpdater:\n"
        "    return lambda cur: update(cur)\n"
        "def abandoned(pending: Snapshot, parent: Snapshot | None) -> bool:\n"
        "    return parent is None\n"
        "def commit(self, session: Session, parent: Snapshot | None) -> Snapshot:\n"
        "    return parent\n"
    )
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "snapshots.py").write_text("def own(cur: Snapshot | None) -> Snapshot | None: ...\n")
    assert updater_sites(tmp_path) == [
        "mod.py:1 def mark",
        "mod.py:4 def __call__",
        "mod.py:7 lambda",
        "mod.py:8 lambda",
        "mod.py:9 lambda",
        "mod.py:10 lambda",
        "mod.py:12 lambda",
    ]
