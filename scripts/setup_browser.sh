#!/usr/bin/env bash
# Debian's Chromium for the inbox's browser tests (Playwright drives it by its path; it never downloads a browser).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ]; then
    echo "the browser tests need Debian's chromium: run 'apt-get install -y chromium' as root" >&2
    exit 1
fi
echo "==> installing Debian's chromium for the browser tests"
export DEBIAN_FRONTEND=noninteractive
# another apt run may hold the lock for a while; wait for it (bounded) rather than fail
for _ in $(seq 1 60); do
    if apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core >/dev/null 2>&1; then
        command -v chromium >/dev/null && exit 0
    fi
    apt-get update -q >/dev/null 2>&1 || true
    sleep 5
done
apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core
