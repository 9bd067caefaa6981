#!/usr/bin/env bash
# Sets up the container engine the docker-mode and discovery tests talk to: podman, serving the
# Docker Engine API on a unix socket, so the gateway's Docker code runs against a real engine.
#   MCPGW_TEST_DOCKER_HOST   the socket (default unix:///tmp/podman.sock)
# Installs podman and runc with apt when they are missing (as root, or through sudo), writes the
# engine settings these machines need when none are there, and starts
# `podman system service` on the socket unless something already answers on it. Idempotent.
# Any step that fails stops the script with what to do: the tests need the engine and never
# skip without it.
set -euo pipefail

host="${MCPGW_TEST_DOCKER_HOST:-unix:///tmp/podman.sock}"
socket="${host#unix://}"

fail() {
  echo "setup-podman: $*" >&2
  exit 1
}

as_root() {
  if [ "$(id -u)" = 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    fail "'$*' needs root, and there is no sudo: run this script as root once"
  fi
}

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  echo "== container engine: installing podman and runc with apt"
  command -v apt-get >/dev/null 2>&1 ||
    fail "podman is not installed and there is no apt-get: install podman 4 (with runc) and run again"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc >/dev/null ||
    as_root sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc' >/dev/null ||
    fail "apt could not install podman and runc: read apt's error above"
fi

# runc and cgroupfs work in containers and VMs without systemd; the file logger needs no journal.
settings="/etc/containers/containers.conf"
if [ ! -s "$settings" ]; then
  echo "== container engine: writing $settings"
  as_root mkdir -p /etc/containers
  as_root tee "$settings" >/dev/null <<'CONF'
[containers]
default_ulimits = []
pids_limit = 0
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
fi

command -v curl >/dev/null 2>&1 || fail "curl is needed to check the engine's socket; install curl"

answers() {
  curl --silent --max-time 5 --unix-socket "$socket" http://engine/_ping 2>/dev/null | grep -q OK
}

if answers; then
  echo "== container engine: the Docker API answers on $host"
  exit 0
fi
echo "== container engine: starting podman system service on $host"
# A socket left by a service that died would make the new one fail to bind.
as_root rm -f "$socket"
as_root mkdir -p "$(dirname "$socket")"
log="${TMPDIR:-/tmp}/mcpgw-podman-service.log"
as_root setsid podman system service --time=0 "unix://$socket" >"$log" 2>&1 </dev/null &
for _ in $(seq 1 100); do
  if answers; then
    echo "   the Docker API answers on $host"
    exit 0
  fi
  sleep 0.1
done
fail "podman system service did not answer on $host within 10 s; its log is $log: $(tail -5 "$log" 2>/dev/null)"
