#!/usr/bin/env bash
# Builds the container image the docker-mode and discovery tests run: the fixture MCP server as
# a static binary, alone in an image imported into the local engine (no registry is involved).
#   localhost/mcpgw-fixture:test    /mcpgw-fixture-server (stdio by default, --http PORT)
# Needs podman (scripts/setup-podman.sh installs it). Rebuilds every time: cargo makes the
# binary incremental, and the import takes about a second.
set -euo pipefail
cd "$(dirname "$0")/.."

image="${MCPGW_TEST_IMAGE:-localhost/mcpgw-fixture:test}"
target="$(rustc -vV | sed -n 's/^host: //p')"
target_dir="${CARGO_TARGET_DIR:-target}"

fail() {
  echo "build-test-image: $*" >&2
  exit 1
}

case "$target" in
  *-linux-gnu) ;;
  "") fail "rustc -vV names no host target; is the Rust toolchain installed?" ;;
  *) fail "the static fixture build expects a *-linux-gnu host, not $target" ;;
esac

command -v podman >/dev/null 2>&1 || fail "podman is not installed; run scripts/setup-podman.sh first"

echo "== test image: building the static fixture server"
# With an explicit --target the flags apply to the target's crates only, so build scripts and
# proc macros stay shared with the normal build.
RUSTFLAGS="-C target-feature=+crt-static" cargo build --locked --quiet \
  -p mcpgw-fixtures --bin mcpgw-fixture-server --target "$target" ||
  fail "the static build of the fixture server failed: read cargo's error above"
binary="$target_dir/$target/debug/mcpgw-fixture-server"
[ -x "$binary" ] || fail "the static build produced no $binary"
if ldd "$binary" 2>&1 | grep -q '=>'; then
  fail "$binary is linked dynamically; the image holds no libraries, so it must be static"
fi

rootfs="$(mktemp -d)"
trap 'rm -rf "$rootfs"' EXIT
cp "$binary" "$rootfs/mcpgw-fixture-server"
mkdir -p "$rootfs/tmp"
tar -C "$rootfs" -cf "$rootfs.tar" . || fail "could not pack the image's file system"
trap 'rm -rf "$rootfs" "$rootfs.tar"' EXIT

echo "== test image: importing $image"
podman import --quiet \
  --change 'ENTRYPOINT ["/mcpgw-fixture-server"]' \
  "$rootfs.tar" "$image" >/dev/null ||
  fail "podman could not import the image $image: read its error above"
podman image exists "$image" || fail "the image $image is missing right after its import"
echo "   $image is ready"
