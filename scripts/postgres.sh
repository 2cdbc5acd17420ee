#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests and benchmarks.
#
#   scripts/postgres.sh install         install Debian's postgresql if initdb is missing
#   scripts/postgres.sh start DIR       initdb + start a cluster under DIR on a free 127.0.0.1 port;
#                                       prints its DSN (also written to DIR/dsn)
#   scripts/postgres.sh stop DIR        stop it and remove DIR
#
# initdb and postgres refuse to run as root, so as root the cluster runs as the `postgres`
# user (created by the package). Durability settings are off (fsync, synchronous_commit,
# full_page_writes): a test cluster dies with its directory anyway. PG_DURABLE=1 keeps
# PostgreSQL's defaults (every commit flushed), for benchmarks.
set -euo pipefail

pg_bin() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
    if [ -z "$dir" ] || [ ! -x "$dir/initdb" ]; then
        return 1
    fi
    echo "$dir"
}

install() {
    if pg_bin >/dev/null; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "postgres.sh: PostgreSQL is not installed; run as root (or: sudo apt-get install postgresql)" >&2
        exit 1
    fi
    echo "==> installing PostgreSQL from Debian's packages" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >&2
    pg_bin >/dev/null
}

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

start() {
    local dir=$1 bin port user
    install
    bin=$(pg_bin)
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then
        chown postgres:postgres "$dir"
        user=postgres
    else
        user=$(id -un)
    fi
    as_owner "$bin/initdb" -D "$dir/data" -U "$user" --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
        cat "$dir/initdb.log" >&2
        exit 1
    }
    local fast="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    if [ "${PG_DURABLE:-0}" = 1 ]; then
        fast=""
    fi
    for _ in 1 2 3 4 5; do  # another process may take the free port between the probe and the bind
        port=$(free_port)
        if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $port \
            -k $dir $fast -c max_connections=300" start >/dev/null 2>&1; then
            echo "postgresql://$user@127.0.0.1:$port/postgres" | tee "$dir/dsn"
            return 0
        fi
    done
    cat "$dir/log" >&2
    exit 1
}

stop() {
    local dir=$1 bin
    if [ -d "$dir/data" ] && bin=$(pg_bin); then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

case "${1:-}" in
install) install ;;
start) start "${2:?usage: postgres.sh start DIR}" ;;
stop) stop "${2:?usage: postgres.sh stop DIR}" ;;
*)
    echo "usage: postgres.sh install | start DIR | stop DIR" >&2
    exit 2
    ;;
esac
