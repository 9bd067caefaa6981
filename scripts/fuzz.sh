#!/usr/bin/env bash
# Runs every cargo-fuzz target of fuzz/ for a bounded time over its committed seed corpus:
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     (default 30)
# Installs cargo-fuzz when it is missing, builds the targets once, then runs each one. New
# inputs that a run finds go to a scratch directory, never into the committed fuzz/corpus/. A
# crash (a panic, a failed invariant, a sanitizer report, an out-of-memory input, a hang) fails
# the script after all targets ran, naming each crashing target and the input libFuzzer saved
# under fuzz/artifacts/. Each target ends with one summary line: runs and seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz: SECONDS_PER_TARGET must be a positive whole number, not '$seconds'" >&2
  exit 2
fi

# cargo fuzz builds with unstable rustc flags (-Zsanitizer=address, sanitizer coverage
# options), which only a nightly compiler accepts; the project builds with the stable toolchain
# alone. RUSTC_BOOTSTRAP=1 lets the stable compiler accept them. It is set for this script's
# own builds of the separate fuzz workspace only (their own target directory), never for the
# product's builds.
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

targets=(config_yaml rest_bodies jsonrpc_message log_lines)
target_dir="fuzz/target/fuzz"

# The longest input each target tries: log lines need room for several lines past the 8192-byte
# limit and for more lines than the buffer keeps; the others are single documents.
max_len_of() {
  case "$1" in
    log_lines) echo 65536 ;;
    config_yaml | jsonrpc_message) echo 16384 ;;
    *) echo 8192 ;;
  esac
}

build_started=$SECONDS
cargo fuzz build --target-dir "$target_dir"
echo "fuzz: built ${#targets[@]} targets in $((SECONDS - build_started)) s"

scratch_root="$(mktemp -d "${TMPDIR:-/tmp}/mcpgw-fuzz.XXXXXX")"
trap 'rm -rf "$scratch_root"' EXIT

failed=()
summaries=()
for target in "${targets[@]}"; do
  corpus="fuzz/corpus/$target"
  if [ ! -d "$corpus" ]; then
    echo "fuzz: seed corpus $corpus is missing" >&2
    exit 1
  fi
  scratch="$scratch_root/$target"
  artifacts="fuzz/artifacts/$target"
  log="fuzz/artifacts/$target.log"
  mkdir -p "$scratch" "$artifacts"
  echo "fuzz: running $target for $seconds s"
  options=()
  if [ -f "fuzz/dicts/$target.dict" ]; then
    options+=("-dict=fuzz/dicts/$target.dict")
  fi
  status=0
  # libFuzzer writes new inputs into the first corpus directory only: the scratch one.
  cargo fuzz run --target-dir "$target_dir" "$target" "$scratch" "$corpus" -- \
    ${options[@]+"${options[@]}"} \
    -max_total_time="$seconds" \
    -max_len="$(max_len_of "$target")" \
    -timeout=10 \
    -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" \
    -print_final_stats=1 \
    >"$log" 2>&1 || status=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  took="$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n 1)"
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$log" >&2
    input="$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)"
    echo "fuzz: $target FAILED (exit $status); crashing input: ${input:-none saved, see $log}" >&2
    echo "fuzz: reproduce with: RUSTC_BOOTSTRAP=1 cargo fuzz run --target-dir $target_dir $target ${input:-}" >&2
    failed+=("$target: ${input:-$log}")
    summaries+=("fuzz: $target: CRASHED after ${runs:-?} runs")
  else
    summaries+=("fuzz: $target: ${runs:-?} runs in ${took:-$seconds} s, no crash")
  fi
done

for summary in "${summaries[@]}"; do
  echo "$summary"
done
if [ "${#failed[@]}" -ne 0 ]; then
  for failure in "${failed[@]}"; do
    echo "fuzz: crash in $failure" >&2
  done
  exit 1
fi
