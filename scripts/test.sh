#!/usr/bin/env bash
# Runs every test of the workspace on a fresh machine: installs what the tests need, builds
# everything (the gateway binary, the fixture MCP server, the examples, the benchmark harness),
# then fuzzes the input parsers for a bounded time (scripts/fuzz.sh, which installs cargo-fuzz),
# follows the README's quick start word for word on a fresh clone (scripts/readme-check.sh), checks
# the gateway's instructions per tool call against the committed figures (mcpgw-bench cpu-check),
# and runs the unit, contract, architecture and end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== installing the real MCP peers of the end-to-end tests"
./scripts/install-test-deps.sh

echo "== building the workspace"
cargo build --workspace --all-targets --locked

echo "== fuzzing the input parsers (30 s per target)"
./scripts/fuzz.sh

echo "== following the README's quick start on a fresh clone"
./scripts/readme-check.sh

echo "== the gateway's instructions per tool call against bench/cpu-baseline.txt"
# Release binaries, built in the README check's build directory, whose third-party crates that
# check has just compiled; the harness's debug build drives them.
release_dir="${MCPGW_README_CACHE:-$HOME/.cache/mcpgw-readme}/target"
cargo build --release --locked -p mcpgw -p mcpgw-fixtures --target-dir "$release_dir"
MCPGW_BENCH_BINARIES="$release_dir/release" ./target/debug/mcpgw-bench cpu-check

echo "== running the tests"
cargo test --workspace --locked --no-fail-fast
