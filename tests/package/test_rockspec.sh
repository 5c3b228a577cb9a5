#!/usr/bin/env bash
# Builds netcl-scm-1.rockspec with LuaRocks from a copy of the source tree, offline, into a
# temporary tree; then requires netcl from stock lua5.4 and runs the rock's netcl-lua.
#   test_rockspec.sh SOURCE_DIR
set -euo pipefail
src=$1
for tool in luarocks lua5.4 tar; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (Debian: luarocks)"; exit 77; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A copy: `luarocks make` builds inside the source directory.
mkdir "$tmp/src"
tar -C "$src" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$tmp/src" -xf -
unset LD_PRELOAD LD_LIBRARY_PATH LUA_INIT LUA_INIT_5_4
rocks() { luarocks --tree "$tmp/tree" --lua-version 5.4 "$@"; }
# no route to a rocks server: the build must not need one
(cd "$tmp/src" && CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
   rocks --only-server=file:///nonexistent make netcl-scm-1.rockspec) >"$tmp/build.log" 2>&1 \
  || { tail -40 "$tmp/build.log"; fail "luarocks make"; }

paths=$(rocks path)
out=$(cd "$tmp" && eval "$paths" && lua5.4 -e 'local nc = require "netcl"; print(nc.ones({2, 2}))
  print(package.searchpath("netcl.core", package.cpath))')
case "$out" in *"tensor([[1., 1.],"*"$tmp/tree/lib/lua/5.4/netcl/core.so"*) ;; *) fail "lua5.4 with the rock: $out" ;; esac

out=$("$tmp/tree/bin/netcl-lua" -e 'print(require("netcl").zeros({2}))')
case "$out" in *"tensor([0., 0.]"*) ;; *) fail "the rock's netcl-lua: $out" ;; esac

rocks remove netcl >/dev/null
[ ! -e "$tmp/tree/lib/lua/5.4/netcl/core.so" ] || fail "luarocks remove left the C module behind"
echo ok
