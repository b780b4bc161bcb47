#!/bin/sh
# Installs the peers of the `split` lab scenario ([SplitTCP]): an HTTP server
# (nginx), Dante's SOCKS server (danted) and Squid. Idempotent: packages that
# are already installed are left alone. Needs root and the Debian archive.
set -eu

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

missing=""
have nginx || missing="$missing nginx-light"
have danted || missing="$missing dante-server"
have squid || missing="$missing squid"

if [ -z "$missing" ]; then
    echo "split peers already installed (nginx, danted, squid)"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-split-peers.sh: run as root to install:$missing" >&2
    exit 2
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update
# nginx-light is gone from newer Debian releases; fall back to nginx.
if ! apt-get install -y --no-install-recommends $missing; then
    missing=$(echo "$missing" | sed 's/nginx-light/nginx/')
    apt-get install -y --no-install-recommends $missing
fi
# The packages start system-wide daemons; the lab runs its own instances
# inside namespaces, so stop the global ones (ignore failures: no systemd here).
for svc in nginx danted squid; do
    if command -v systemctl >/dev/null 2>&1; then systemctl stop "$svc" >/dev/null 2>&1 || true; fi
    if command -v service >/dev/null 2>&1; then service "$svc" stop >/dev/null 2>&1 || true; fi
done
echo "split peers installed:$missing"
