#!/usr/bin/env bash
# Follows the README's quick start word for word on a fresh clone of this repository's HEAD:
# the run command (the release build and the gateway on port 8000 with examples/gateway.yaml),
# each `curl` line with its expected answer, an MCP client (the official Python SDK from
# .venv-test, which scripts/install-test-deps.sh installs) listing and calling the demo's tools,
# then Ctrl-C. tests/python/readme_quickstart.py holds the expectations and does the checking.
#
# The clone is made afresh at the same place every run, under MCPGW_README_CACHE (default
# ~/.cache/mcpgw-readme), and builds into a target directory kept beside it (the clone's target/
# is a symlink to it): a second run, on this machine or by CI on it, rebuilds only the project's
# own crates, not every dependency. Port 8000 must be free: the README names it.
set -euo pipefail
cd "$(dirname "$0")/.."
repo_root="$(pwd)"

client_python="$repo_root/.venv-test/bin/python"
[ -x "$client_python" ] ||
  { echo "readme-check: $client_python is missing: run scripts/install-test-deps.sh" >&2; exit 1; }
if (exec 3<>/dev/tcp/127.0.0.1/8000) 2>/dev/null; then
  echo "readme-check: something already listens on port 8000, which the README's run command needs" >&2
  exit 1
fi

cache="${MCPGW_README_CACHE:-$HOME/.cache/mcpgw-readme}"
clone="$cache/mcpgw"
mkdir -p "$cache/target"
rm -rf "$clone"
git clone --quiet "$repo_root" "$clone"
ln -s "$cache/target" "$clone/target"

started=$(date +%s)
"$client_python" tests/python/readme_quickstart.py "$clone" --client-python "$client_python"
echo "readme-check: the quick start works as written ($(($(date +%s) - started)) s)"
