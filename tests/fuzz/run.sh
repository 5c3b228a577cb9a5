#!/bin/sh
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.c) with clang in $FUZZ_BUILD (default
# build-fuzz) and runs each one for an equal share of $FUZZ_SECONDS (default 60 in all). Each run
# first replays the target's whole corpus (tests/fuzz/corpus/<name>/, read only: new inputs go to
# $FUZZ_BUILD/fuzz-work/<name>/corpus), then mutates. A crash, a leak, a sanitizer report or a
# timeout stops that target, leaves the input in $FUZZ_BUILD/fuzz-work/<name>/crashes/ and makes
# this script fail: add the input to the corpus (as bad_<what>) and fix the reader.
set -eu
total=${FUZZ_SECONDS:-60}
build=${FUZZ_BUILD:-build-fuzz}
jobs=${JOBS:-$(nproc)}
if ! command -v clang >/dev/null 2>&1; then
  echo "fuzz: clang is needed for libFuzzer (apt-get install clang)" >&2
  exit 1
fi
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNETCL_FUZZ=ON -DNETCL_OPENCL=OFF \
  -DNETCL_MPI=OFF >/dev/null
targets=$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||')
cmake --build "$build" -j"$jobs" --target $(for t in $targets; do printf 'fuzz_%s ' "$t"; done)
n=$(echo $targets | wc -w)
each=$((total / n))
[ "$each" -ge 1 ] || each=1
failed=""
for t in $targets; do
  work=$build/fuzz-work/$t
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/crashes"
  echo "fuzz: $t for ${each}s over tests/fuzz/corpus/$t"
  if ! "$build/tests/fuzz_$t" -max_total_time="$each" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$work/crashes/" "$work/corpus" "tests/fuzz/corpus/$t" >"$work/log" 2>&1; then
    failed="$failed $t"
    tail -40 "$work/log"
  fi
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$work/log" | sed "s/^/fuzz: $t: /" || true
done
if [ -n "$failed" ]; then
  echo "fuzz: FAILED:$failed (inputs under $build/fuzz-work/*/crashes/)" >&2
  exit 1
fi
echo "fuzz: $n targets, ${each}s each, no crash"
