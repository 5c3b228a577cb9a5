#!/usr/bin/env bash
# Runs the shell commands of README.md and docs/install.md as written: every ```sh block, each
# as one bash script from the source directory, then compiles and runs docs/c-api.md's first
# example against the installed prefix through pkg-config.
#   test_doc_commands.sh SOURCE_DIR BUILD_DIR
#
# What differs from a reader's run, and why:
#   - `make` targets get BUILD=<this build directory> (the docs' build/, wherever ctest's is), and
#     `build/` in a command is that directory;
#   - `make test` is not run (it is the suite that runs this test);
#   - `make demo` trains one epoch of the sample on a small synthetic dataset in the
#     Fashion-MNIST layout (NETCL_FASHION_MNIST, DEMO_ARGS), not three on the real one, and writes
#     its checkpoint and chart to the temporary folder (a later --checkpoint wins), not over a
#     reader's build/demo;
#   - HOME is a temporary folder, so `make install PREFIX=$HOME/.local` installs there, and PREFIX
#     is that prefix for the commands written for "another prefix";
#   - a block that starts with `luarocks` is run by the package.rockspec test (a Release build of
#     its own), as written.
# A block with any other command runs as it is; when it fails, so does this test.
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
for tool in make lua5.4 cc pkg-config; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (make deps)"; exit 77; }
done
[ -x "$build/bin/netcl-lua" ] || { echo "SKIP: $build has no netcl-lua"; exit 77; }
if grep -q '^NETCL_SANITIZE:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "SKIP: a sanitizer build (installed binaries would need the ASan runtime preloaded)"; exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset LD_PRELOAD LD_LIBRARY_PATH LUA_INIT LUA_INIT_5_4 LUA_PATH LUA_CPATH

# A synthetic Fashion-MNIST (64 training and 32 test images) for `make demo`.
data="$tmp/fashion-mnist"
mkdir -p "$data"
LUA_PATH="$src/tests/lua/?.lua;;" "$build/bin/netcl-lua" -e "
  local H = require 'helpers'
  H.write_fashion_split('$data', 'train', 64, 3)
  H.write_fashion_split('$data', 't10k', 32, 5)" || fail "writing the synthetic dataset"

mkdir -p "$tmp/home"
prelude="$tmp/prelude.sh"
cat >"$prelude" <<EOF
set -eo pipefail
export HOME='$tmp/home' PREFIX='$tmp/home/.local' NETCL_FASHION_MNIST='$data'
make() {
  case "\${1:-}" in
    test) echo "(make test: not run here)"; return 0 ;;
    demo) command make -C '$src' BUILD='$build' \\
            DEMO_ARGS='--epochs 1 --batch-size 16 --checkpoint $tmp/demo.netcl' "\$@" ;;
    *) command make -C '$src' BUILD='$build' "\$@" ;;
  esac
}
cd '$src'
EOF

# run_blocks FILE: each ```sh block of FILE as one script; prints its output.
blocks=0
run_blocks() {
  local file=$1 n=0
  local block="" in=0
  while IFS= read -r line || [ -n "$line" ]; do
    if [ $in = 0 ] && [ "$line" = '```sh' ]; then in=1; block=""; continue; fi
    if [ $in = 1 ] && [ "$line" = '```' ]; then
      in=0; n=$((n + 1)); blocks=$((blocks + 1))
      local first
      first=$(printf '%s\n' "$block" | sed -n '/[^[:space:]]/{p;q}')
      case "$first" in
        luarocks*) echo "== $file, block $n: run by package.rockspec"; continue ;;
      esac
      # build/ in a command is this build directory
      local script="$block"
      [ "$build" = "$src/build" ] || script=$(printf '%s\n' "$block" | sed "s#\\(^\\|[ '=]\\)build/#\\1$build/#g")
      echo "== $file, block $n:"
      printf '%s\n' "$script"
      local out
      out=$(bash -c "source '$prelude'; $script" 2>&1) || { printf '%s\n' "$out" | tail -40; fail "$file, block $n"; }
      printf '%s\n' "$out" | tail -5
      printf '%s\n' "$out" >"$tmp/out.$blocks"
      continue
    fi
    [ $in = 1 ] && block+="$line"$'\n'
  done <"$file"
  [ $n -gt 0 ] || fail "$file has no sh block"
}

run_blocks "$src/README.md"
grep -q "final test accuracy" "$tmp"/out.* || fail "make demo did not print a final test accuracy"
[ -s "$tmp/demo.netcl" ] || fail "make demo wrote no checkpoint"
grep -q "opencl\|cpu" "$tmp"/out.* || fail "netcl-lua --list-devices printed no device"
run_blocks "$src/docs/install.md"
[ -x "$tmp/home/.local/bin/netcl-lua" ] || fail "make install PREFIX=\$HOME/.local installed no netcl-lua"
grep -q 'tensor(\[\[1., 1.\],' "$tmp"/out.* || fail "lua5.4 did not print the tensor of docs/install.md"

# docs/c-api.md's first example, against the installed prefix.
pc=$(dirname "$(find "$tmp/home/.local" -name netcl.pc | head -1)")
[ -n "$pc" ] || fail "no netcl.pc under the prefix"
awk '/^```c$/ && !done {f = 1; next} /^```$/ && f {f = 0; done = 1} f' "$src/docs/c-api.md" >"$tmp/example.c"
grep -q nc_init "$tmp/example.c" || fail "docs/c-api.md: no first example found"
libdir=$(PKG_CONFIG_PATH="$pc" pkg-config --variable=libdir netcl)
# shellcheck disable=SC2046
cc -std=c99 -Wall -Werror -o "$tmp/example" "$tmp/example.c" $(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs netcl) \
   -Wl,-rpath,"$libdir" \
  || fail "docs/c-api.md's example does not compile"
out=$("$tmp/example") || fail "docs/c-api.md's example failed: $out"
[ "$out" = "sum = 9" ] || fail "docs/c-api.md's example printed '$out', expected 'sum = 9'"
echo "ok ($blocks blocks)"
