#!/usr/bin/env bash
# Builds netcl-scm-1.rockspec with LuaRocks from a copy of the source tree, offline, with the
# command docs/install.md gives, as written: `luarocks make netcl-scm-1.rockspec` (no
# --lua-version, which Debian's luarocks 3.8 needs elsewhere: the checkout's .luarocks/ and
# lua_modules/ make it a Lua 5.4 project). The rock goes into the copy's lua_modules/; then
# requires netcl from stock lua5.4 with `luarocks path`, runs the rock's netcl-lua and removes it.
#   test_rockspec.sh SOURCE_DIR
set -euo pipefail
src=$1
for tool in luarocks lua5.4 tar; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (Debian: luarocks)"; exit 77; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A copy: `luarocks make` builds inside the source directory. What a developer installed into
# the checkout's own lua_modules/ stays behind.
mkdir "$tmp/src"
tar -C "$src" --exclude='./build*' --exclude=./.git --exclude='./lua_modules/*' -cf - . | tar -C "$tmp/src" -xf -
cp "$src/lua_modules/.gitignore" "$tmp/src/lua_modules/"
unset LD_PRELOAD LD_LIBRARY_PATH LUA_INIT LUA_INIT_5_4
# A home of its own: no user configuration, and no route to a rocks server (the build must not
# need one).
export HOME="$tmp/home"
mkdir -p "$HOME/.luarocks"
for v in 5.1 5.4; do echo 'rocks_servers = {"file:///nonexistent"}' >"$HOME/.luarocks/config-$v.lua"; done
tree="$tmp/src/lua_modules"
(cd "$tmp/src" && CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
   luarocks make netcl-scm-1.rockspec) >"$tmp/build.log" 2>&1 \
  || { tail -40 "$tmp/build.log"; fail "luarocks make netcl-scm-1.rockspec"; }

paths=$(cd "$tmp/src" && luarocks path)
out=$(cd "$tmp" && eval "$paths" && lua5.4 -e 'local nc = require "netcl"; print(nc.ones({2, 2}))
  print(package.searchpath("netcl.core", package.cpath))')
# (LuaRocks names the project tree "$tmp/src/./lua_modules")
case "$out" in *"tensor([[1., 1.],"*"$tmp/src/"*"lua_modules/lib/lua/5.4/netcl/core.so"*) ;; *) fail "lua5.4 with the rock: $out" ;; esac

out=$("$tree/bin/netcl-lua" -e 'print(require("netcl").zeros({2}))')
case "$out" in *"tensor([0., 0.]"*) ;; *) fail "the rock's netcl-lua: $out" ;; esac

(cd "$tmp/src" && luarocks remove netcl) >/dev/null
[ ! -e "$tree/lib/lua/5.4/netcl/core.so" ] || fail "luarocks remove left the C module behind"
echo ok
