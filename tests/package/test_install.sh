#!/usr/bin/env bash
# Installs the build into a temporary prefix and uses it the three ways a user would:
# stock lua5.4 with LUA_PATH/LUA_CPATH pointing there, the installed netcl-lua, and a C
# project through find_package(netcl) and through pkg-config. Then moves the prefix and
# checks the C module still finds libnetcl.
#   test_install.sh BUILD_DIR SOURCE_DIR LIBDIR LUADIR CMODDIR SANITIZE(ON|OFF)
set -euo pipefail
build=$1 src=$2 libdir=$3 luadir=$4 cmoddir=$5 sanitize=$6

for tool in lua5.4 pkg-config cc; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

# In a sanitizer build the installed archive holds instrumented code, so consumers link with
# the sanitizers too; stock lua5.4 (not instrumented) needs their runtimes preloaded.
san_flags=""
lua_preload=""
if [ "$sanitize" = ON ]; then
  san_flags="-fsanitize=address,undefined"
  lua_preload="$(cc -print-file-name=libasan.so) $(cc -print-file-name=libubsan.so)"
fi
unset LD_LIBRARY_PATH LUA_INIT LUA_INIT_5_4

fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect NAME OUTPUT NEEDLE
  case "$2" in *"$3"*) ;; *) fail "$1: expected '$3' in: $2" ;; esac
}

for f in include/netcl/netcl.h include/netcl_lua.h "$libdir/libnetcl.so" "$libdir/libnetcl_lua.a" \
         "$cmoddir/netcl/core.so" "$luadir/netcl/init.lua" "$luadir/netcl/plot.lua" bin/netcl-lua \
         "$libdir/cmake/netcl/netclConfig.cmake" "$libdir/pkgconfig/netcl.pc" "$libdir/pkgconfig/netcl-lua.pc"; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done

# Each installed header compiles on its own, as C and (with a C++ compiler) as C++: none may
# lean on a header that is not installed, and C++ hosts can include them all.
lua_cflags=$(pkg-config --cflags lua5.4)
for h in "$prefix"/include/netcl/*.h "$prefix/include/netcl_lua.h"; do
  name=${h#"$prefix/include/"}
  echo "#include <$name>" | cc -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$prefix/include" \
      $lua_cflags -x c - || fail "$name does not compile on its own as C"
  if command -v c++ >/dev/null; then
    echo "#include <$name>" | c++ -std=c++11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only -I"$prefix/include" \
        $lua_cflags -x c++ - || fail "$name does not compile on its own as C++"
  fi
done

stock_lua() { # only the prefix on the module paths: nothing may come from elsewhere
  (cd "$tmp" && LD_PRELOAD="$lua_preload" ASAN_OPTIONS=detect_leaks=0 \
     LUA_PATH="$1/$luadir/?.lua;$1/$luadir/?/init.lua" LUA_CPATH="$1/$cmoddir/?.so" lua5.4 -e "$2")
}
out=$(stock_lua "$prefix" 'local nc=require"netcl"; print(nc.ones({2,2}))')
expect "lua5.4 require netcl" "$out" "tensor([[1., 1.],"
out=$(stock_lua "$prefix" 'print(package.searchpath("netcl.core", package.cpath), type(require"netcl.plot".line))')
expect "C module path" "$out" "$prefix/$cmoddir/netcl/core.so	function"

out=$(cd "$tmp" && "$prefix/bin/netcl-lua" -e 'print(require"netcl".zeros({3}))')
expect "installed netcl-lua" "$out" "tensor([0., 0., 0.]"

# find_package(netcl)
cmake -S "$src/tests/package/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS="$san_flags" >"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "configuring the find_package consumer"; }
cmake --build "$tmp/consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "building the find_package consumer"; }
out=$("$tmp/consumer/consumer")
expect "find_package consumer" "$out" "ok"

# pkg-config
flags=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs netcl-lua)
cc $san_flags -o "$tmp/pc_consumer" "$src/tests/package/consumer/main.c" $flags -Wl,-rpath,"$prefix/$libdir"
out=$("$tmp/pc_consumer")
expect "pkg-config consumer" "$out" "ok"

# the prefix can move
mv "$prefix" "$tmp/moved"
out=$(stock_lua "$tmp/moved" 'print(require"netcl".full({2}, 7))')
expect "moved prefix" "$out" "tensor([7., 7.]"
out=$("$tmp/moved/bin/netcl-lua" -e 'print(require"netcl".version)')
expect "moved netcl-lua" "$out" "0."
echo ok
