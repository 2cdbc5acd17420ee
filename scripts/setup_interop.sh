#!/usr/bin/env bash
# Install the published clients that tests/integration/test_interop.py (Genkit) and test_agui.py (AG-UI) drive
# interlock's server with:
#   1. npm `genkit` and `@ag-ui/client`, exactly as pinned by tests/kit/interop/package.json + package-lock.json, into .interop/js
#      (`npm ci --omit=optional --ignore-scripts`: ~15 s and ~90 MB; the optional firebase packages are not
#      needed by the client),
#   2. PyPI `genkit`, as pinned by tests/kit/interop/requirements.txt, into its own venv .interop/py
#      (~20 s, ~120 MB; never into interlock's .venv).
#
# Idempotent: each half keeps a stamp with a hash of its pins (and of the node/python version); when the
# stamp matches and the client imports, the half is skipped, so a second run takes well under a second.
# npm's and pip's own caches make a reinstall on the same machine quick.
#
# Environment:
#   INTERLOCK_INTEROP_DIR   where to install (default: .interop at the repo root)
#   PYTHON                  the interpreter the Python client's venv is made from (default: python3)
#   NODE, NPM               the node and npm commands (default: node, npm)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SRC="$ROOT/tests/kit/interop"
DIR="${INTERLOCK_INTEROP_DIR:-$ROOT/.interop}"
PYTHON="${PYTHON:-python3}"
NODE="${NODE:-node}"
NPM="${NPM:-npm}"

say() { printf '==> %s\n' "$*"; }
fail() {
    printf 'setup_interop: %s\n' "$*" >&2
    exit 1
}
digest() { sha256sum | cut -d' ' -f1; }

mkdir -p "$DIR"
# Two test runs starting at once must not install over each other.
if command -v flock >/dev/null; then
    exec 9>"$DIR/.lock"
    flock 9
fi

# --- 1. the JS client ------------------------------------------------------------------------------------------------
command -v "$NODE" >/dev/null || fail "'$NODE' not found: the JS client needs Node.js 18 or later (https://nodejs.org)"
command -v "$NPM" >/dev/null || fail "'$NPM' not found: it installs the JS client from the npm registry"
node_version="$("$NODE" --version)"
node_major="${node_version#v}"
node_major="${node_major%%.*}"
[ "$node_major" -ge 18 ] 2>/dev/null || fail "Node.js 18 or later is needed, found $node_version"

JS="$DIR/js"
js_pin="$(sed -n 's/.*"genkit": *"\([^"]*\)".*/\1/p' "$SRC/package.json" | head -1)"
agui_pin="$(sed -n 's/.*"@ag-ui\/client": *"\([^"]*\)".*/\1/p' "$SRC/package.json" | head -1)"
js_want="$( (cat "$SRC/package.json" "$SRC/package-lock.json" && echo "$node_version") | digest)"
js_check="const r = require('node:module').createRequire('$JS/package.json'); r('genkit/beta/client').remoteAgent && r('@ag-ui/client').HttpAgent"
if [ "$(cat "$JS/.stamp" 2>/dev/null)" = "$js_want" ] && "$NODE" -e "$js_check" >/dev/null 2>&1; then
    say "JS clients: npm genkit@$js_pin and @ag-ui/client@$agui_pin already installed in $JS"
else
    say "JS clients: installing npm genkit@$js_pin and @ag-ui/client@$agui_pin into $JS (npm ci from tests/kit/interop/package-lock.json; ~15 s)"
    t0=$(date +%s)
    rm -rf "$JS"
    mkdir -p "$JS"
    cp "$SRC/package.json" "$SRC/package-lock.json" "$JS/"
    (cd "$JS" && "$NPM" ci --omit=optional --ignore-scripts --no-audit --no-fund --loglevel=error) ||
        fail "npm ci failed in $JS (is the npm registry reachable?)"
    "$NODE" -e "$js_check" >/dev/null || fail "the installed JS client does not load: $js_check"
    echo "$js_want" >"$JS/.stamp"
    say "JS client: installed in $(($(date +%s) - t0))s ($node_version)"
fi

# --- 2. the Python client --------------------------------------------------------------------------------------------
command -v "$PYTHON" >/dev/null || fail "'$PYTHON' not found: the Python client's venv needs Python 3.10 or later"
PY="$DIR/py"
py_pin="$(grep -v '^#' "$SRC/requirements.txt" | grep . | paste -sd' ')"
py_version="$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
py_want="$( (cat "$SRC/requirements.txt" && echo "$py_version") | digest)"
py_check="import genkit.exp; genkit.exp.remote_agent"
if [ "$(cat "$PY/.stamp" 2>/dev/null)" = "$py_want" ] && "$PY/bin/python" -c "$py_check" >/dev/null 2>&1; then
    say "Python client: $py_pin already installed in $PY"
else
    say "Python client: creating the venv $PY (Python $py_version) and installing $py_pin (~20 s)"
    t0=$(date +%s)
    rm -rf "$PY"
    "$PYTHON" -m venv "$PY" || fail "'$PYTHON -m venv $PY' failed (Debian: apt-get install python3-venv)"
    "$PY/bin/python" -m pip install --quiet --disable-pip-version-check -r "$SRC/requirements.txt" ||
        fail "pip could not install $py_pin (is PyPI reachable?)"
    "$PY/bin/python" -c "$py_check" || fail "the installed Python client does not import: $py_check"
    echo "$py_want" >"$PY/.stamp"
    say "Python client: installed in $(($(date +%s) - t0))s"
fi

say "interop clients ready in $DIR"
