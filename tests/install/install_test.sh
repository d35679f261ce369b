#!/usr/bin/env bash
# Installs lathe with `cmake --install` into a temporary prefix, then runs the installed binary
# as an unprivileged user (nobody), who can read neither the build user's home nor its Python
# environment (where the build takes the Arrow libraries from): the binary must find its Parquet
# plug-in, the Arrow and Parquet libraries the plug-in links, and the bundled catalog in the
# prefix. Runs the bundled catalog there, which writes Parquet, and reads it back with
# `lab report`.
#
# usage: tests/install/install_test.sh CMAKE BUILD_DIR
# Exit status: 0 pass, 1 fail, 77 skipped (not root, so it cannot switch user; in CI, where
# tools/test.sh runs as root, a skip fails instead).
set -euo pipefail

fail() {
  echo "install_test: FAIL: $*" >&2
  exit 1
}
skip() {
  [ "${CI:-}" = "true" ] && fail "cannot skip in CI: $*"
  echo "install_test: SKIP: $*" >&2
  exit 77
}

[ $# -eq 2 ] || { echo "usage: $0 CMAKE BUILD_DIR" >&2; exit 2; }
cmake=$1
build=$2

tmp=$(mktemp -d /tmp/lathe-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
prefix=$tmp/prefix
lathe=$prefix/bin/lathe
if ! "$cmake" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1; then
  cat "$tmp/install.log" >&2
  fail "cmake --install $build --prefix $prefix failed"
fi
[ -x "$lathe" ] || fail "cmake --install $build put no executable at PREFIX/bin/lathe"
# The binary links no Arrow; its Parquet plug-in (src/lab/dataset_plugin.h) sits in
# PREFIX/lib/lathe, and the Arrow libraries the plug-in needs must resolve there too, not to
# where the build found them.
if ldd "$lathe" | grep -q -E "libarrow|libparquet"; then
  fail "the installed binary links Arrow itself: $(ldd "$lathe" | grep -E "libarrow|libparquet")"
fi
plugin=$prefix/lib/lathe/liblathe_dataset.so
[ -f "$plugin" ] || fail "cmake --install $build put no Parquet plug-in at $plugin"
for lib in libarrow libparquet; do
  where=$(ldd "$plugin" | awk -v lib="$lib.so" 'index($1, lib) == 1 { print $3 }')
  if [ -z "$where" ] ||
    [ "$(realpath -m "$where")" != "$(realpath "$prefix")/lib/lathe/$(basename "$where")" ]; then
    fail "the installed Parquet plug-in does not take $lib from PREFIX/lib/lathe: $(ldd "$plugin" | grep "$lib" || echo "not linked")"
  fi
done

[ "$(id -u)" -eq 0 ] || skip "needs root to run the installed binary as another user (nobody)"
uid=$(id -u nobody 2>/dev/null) || skip "no user nobody to run the installed binary as"
gid=$(id -g nobody)
command -v setpriv >/dev/null || skip "setpriv not installed (Debian: util-linux)"
home=$tmp/home
mkdir -m 755 "$home"
chown "$uid:$gid" "$home"
# A clean environment: nobody's own HOME, no LD_LIBRARY_PATH, no venv on PATH.
as_nobody() {
  (cd "$home" && env -i HOME="$home" PATH=/usr/bin:/bin \
    setpriv --reuid="$uid" --regid="$gid" --clear-groups -- "$@")
}
as_nobody /bin/true || skip "setpriv cannot switch to nobody here"

as_nobody "$lathe" --version >"$tmp/version.log" 2>&1 ||
  fail "the installed lathe --version, run as nobody, failed: $(cat "$tmp/version.log")"
# The main job: the whole bundled catalog (a few seconds), from PREFIX/share/lathe, since
# nobody's working directory has no tests/fixtures.
if ! as_nobody "$lathe" lab run --out "$home/sweep" --no-hf-cache --quiet >"$tmp/run.log" 2>&1; then
  cat "$tmp/run.log" >&2
  fail "the installed lathe lab run, run as nobody, failed"
fi
grep -q "\"$prefix/share/lathe/tests/fixtures/tiny/" "$home/sweep/catalog.json" ||
  fail "lab run did not take the bundled catalog from PREFIX/share/lathe: $(head -c 600 "$home/sweep/catalog.json")"
as_nobody "$lathe" lab report "$home/sweep" >"$tmp/report.md" 2>&1 ||
  fail "the installed lathe lab report, run as nobody, failed: $(cat "$tmp/report.md")"
ls "$home"/sweep/dataset/*.parquet >/dev/null 2>&1 || fail "lab run wrote no Parquet file: $(cat "$tmp/run.log")"
grep -q '^| pass | [1-9]' "$tmp/report.md" || fail "no passing model in the report: $(cat "$tmp/report.md")"
echo "install_test: installed binary ran as nobody: $(head -n 1 "$tmp/version.log")"
