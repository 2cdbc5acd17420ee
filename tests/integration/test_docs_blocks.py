"""Every Python block of README.md and of the docs site (docs/**/*.md) runs as written.

A block is a fenced code block whose info string names Python (```python, ```py, ```python3).
Each block is a complete program (imports, a model, ``asyncio.run``) and runs on its own in a
fresh interpreter, in an empty working directory; it passes when it exits 0. Snippet lines
(``--8<-- "examples/x.py"``, which the docs site includes with pymdownx.snippets) are replaced
by the file they name before the block runs, as MkDocs does.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest
from where import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TIMEOUT = 120.0
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)\n", re.MULTILINE)
_PYTHON = frozenset({"python", "py", "python3"})
_SNIPPET = re.compile(r'^[ \t]*-{1,}8<-{1,}[ \t]+"(?P<path>[^"]+)"[ \t]*$', re.MULTILINE)


@dataclass(frozen=True)
class Block:
    page: pathlib.Path
    line: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def expand(code: str) -> str:
    """Replace each snippet line by the file it names (relative to the repository root)."""
    return _SNIPPET.sub(lambda m: (ROOT / m["path"]).read_text(), code)


def blocks(text: str, page: pathlib.Path) -> list[Block]:
    """The page's Python blocks, with the line each starts on."""
    found: list[Block] = []
    pos = 0
    while (opening := _FENCE.search(text, pos)) is not None:
        indent, fence = opening["indent"], opening["fence"]
        closing = re.compile(rf"^{re.escape(indent)}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE)
        end = closing.search(text, opening.end())
        if end is None:
            raise AssertionError(f"{page}: the block at line {text.count(chr(10), 0, opening.start()) + 1} never ends")
        language = (opening["info"].split() or [""])[0].lower()
        if language in _PYTHON:
            lines = text[opening.end() : end.start()].splitlines(keepends=True)
            body = "".join(line.removeprefix(indent) for line in lines)
            found.append(Block(page, text.count("\n", 0, opening.start()) + 1, expand(body)))
        pos = end.end()
    return found


ALL = [b for page in PAGES for b in blocks(page.read_text(), page)]


def test_the_extractor_finds_python_blocks_and_nothing_else() -> None:
    page = ROOT / "x.md"
    text = (
        'a\n```sh\nls\n```\n\n```python\nprint(1)\n```\n  ```py title="t"\n  print(2)\n  ```\n````python\n```\n````\n'
    )
    assert [(b.line, b.code) for b in blocks(text, page)] == [(6, "print(1)\n"), (9, "print(2)\n"), (12, "```\n")]
    snippet = blocks('```python\n--8<-- "examples/respond.py"\n```\n', page)[0]
    assert snippet.code == (ROOT / "examples" / "respond.py").read_text() + "\n"


def test_every_page_with_code_has_runnable_blocks() -> None:
    pages = {b.page for b in ALL}
    assert ROOT / "README.md" in pages and len(pages) >= 10, sorted(str(p) for p in pages)


def test_the_readme_is_short_and_shows_a_complete_example_early() -> None:
    readme = ROOT / "README.md"
    text = readme.read_text()
    first = blocks(text, readme)[0]
    assert len(text.splitlines()) <= 250, "the README is for newcomers: move details to docs/"
    assert first.line <= 80, f"the README's first Python block starts at line {first.line}"
    assert len(first.code.splitlines()) <= 40, "the README's first example has more than 40 lines"


def test_every_local_link_of_the_readme_exists() -> None:
    targets = re.findall(r"\]\((?!https?:)([^)#\s]+)(?:#[^)]*)?\)", (ROOT / "README.md").read_text())
    assert targets, "no links found: the pattern is wrong"
    assert [t for t in targets if not (ROOT / t).exists()] == []


@pytest.mark.parametrize("block", ALL, ids=[b.id for b in ALL])
def test_block_runs(block: Block, tmp_path: pathlib.Path) -> None:
    script = tmp_path / "block.py"
    script.write_text(block.code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, f"{block.id} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
