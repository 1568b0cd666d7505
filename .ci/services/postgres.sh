#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests: 127.0.0.1, a free port, a temporary folder.
#
#   .ci/services/postgres.sh start STATE   start a cluster; write STATE/postgres.env, which
#                                          exports ACTORS_TEST_POSTGRES_DSN
#   .ci/services/postgres.sh stop STATE    stop it and remove its folder (harmless when none)
#
# Installs Debian's postgresql package when no server is installed. The server runs as a
# non-root user (initdb refuses root): $ACTORS_PG_OS_USER, by default postgres (the package's
# own user), created when missing. Clients log in as "actors" with a random password
# (scram-sha-256), so the tests can check what a refused password does.
set -euo pipefail

usage="usage: $0 start|stop STATE_DIR"
action="${1:?$usage}"
state="$(realpath -m "${2:?$usage}")"
os_user="${ACTORS_PG_OS_USER:-postgres}"
cd /  # the server's user may not enter the caller's directory

say() { echo "postgres: $*" >&2; }

bindir() {
    local found
    found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    if [[ -n "$found" && -x "$found/initdb" ]]; then
        echo "$found"
    elif command -v initdb >/dev/null; then
        dirname "$(command -v initdb)"
    fi
}

as_server_user() {
    if [[ $EUID -eq 0 ]]; then
        runuser -u "$os_user" -- "$@"
    else
        "$@"
    fi
}

install_server() {
    [[ -n "$(bindir)" ]] && return 0
    if [[ $EUID -ne 0 ]]; then
        say "no PostgreSQL server installed, and only root can install one (apt-get install postgresql)"
        return 1
    fi
    say "installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # No "main" cluster: the tests start their own, and nothing should linger on port 5432.
    apt-get install -y -qq postgresql-common >/dev/null
    sed -i 's/^#* *create_main_cluster.*/create_main_cluster = false/' \
        /etc/postgresql-common/createcluster.conf
    apt-get install -y -qq postgresql >/dev/null
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    install_server
    local bin root password port dsn
    bin="$(bindir)"
    if [[ $EUID -eq 0 ]] && ! id -u "$os_user" >/dev/null 2>&1; then
        useradd --system --no-create-home --shell /usr/sbin/nologin "$os_user"
    fi
    mkdir -p "$state"
    root="$(mktemp -d -t actors-pg.XXXXXX)"
    echo "$root" >"$state/postgres.dir"
    password="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
    umask 077
    printf '%s\n' "$password" >"$root/password"
    [[ $EUID -eq 0 ]] && chown -R "$os_user" "$root"
    as_server_user "$bin/initdb" -D "$root/data" -U actors --auth=scram-sha-256 \
        --pwfile="$root/password" -E UTF8 --no-locale >"$root/initdb.log" 2>&1 \
        || { cat "$root/initdb.log" >&2; return 1; }
    rm -f "$root/password"
    for _attempt in 1 2 3 4 5; do  # another process may take the free port first
        port="$(free_port)"
        if as_server_user "$bin/pg_ctl" -D "$root/data" -l "$root/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$root" \
            start >/dev/null; then
            dsn="postgresql://actors:$password@127.0.0.1:$port/postgres"
            printf 'export ACTORS_TEST_POSTGRES_DSN=%q\n' "$dsn" >"$state/postgres.env"
            say "started on 127.0.0.1:$port (PostgreSQL $("$bin/postgres" --version | awk '{print $3}'), data in $root)"
            return 0
        fi
    done
    cat "$root/server.log" >&2
    return 1
}

stop() {
    local root bin
    root="$(cat "$state/postgres.dir" 2>/dev/null)" || return 0
    bin="$(bindir)"
    if [[ -n "$bin" && -f "$root/data/postmaster.pid" ]]; then
        as_server_user "$bin/pg_ctl" -D "$root/data" -m fast -w -t 60 stop >/dev/null || true
    fi
    rm -rf "$root"
    rm -f "$state/postgres.dir" "$state/postgres.env"
    say "stopped"
}

case "$action" in
    start) start ;;
    stop) stop ;;
    *) echo "$usage" >&2; exit 2 ;;
esac
