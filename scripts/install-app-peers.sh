#!/bin/sh
# Installs the ordinary programs the `pacing-apps` lab scenario runs under
# the cgroup pacer (iperf3, and netcat-openbsd's nc; curl and python3's
# http.server are there already for the tests). Idempotent: what is installed
# is left alone. Needs root and the Debian archive.
set -eu

missing=""
command -v iperf3 >/dev/null 2>&1 || missing="$missing iperf3"
command -v nc >/dev/null 2>&1 || missing="$missing netcat-openbsd"
command -v curl >/dev/null 2>&1 || missing="$missing curl"
command -v python3 >/dev/null 2>&1 || missing="$missing python3"

if [ -z "$missing" ]; then
    echo "pacing-apps programs already installed (iperf3, nc, curl, python3)"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install-app-peers.sh: run as root to install:$missing" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends $missing
# Debian's iperf3 package may start a system-wide server; the lab runs its
# own inside namespaces (ignore failures: no systemd here).
if command -v systemctl >/dev/null 2>&1; then systemctl stop iperf3 >/dev/null 2>&1 || true; fi
echo "pacing-apps programs installed:$missing"
