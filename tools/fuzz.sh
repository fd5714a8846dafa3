#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with clang (ASan + UBSan) in build-fuzz/ and runs each
# for a bounded time: tools/fuzz.sh [SECONDS per harness, default 15] [HARNESS...] (all when none
# is named). Each harness starts from the checked-in seeds (fuzz/corpus/NAME/) and the ones
# fuzz/seeds.sh makes from the test fixtures; what it finds that is new goes to
# build-fuzz/corpus/NAME/, a crashing input to build-fuzz/artifacts/NAME/. A finding (crash,
# sanitizer report, an exception other than saobp::Error, an input slower than 10 s or above
# 2 GB) stops the script with a non-zero exit; see docs/reliability.md for reproducing one.
# test.sh runs it after the tests when clang is installed (about 5 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
shift || true
dir=build-fuzz
args=(-G Ninja -DCMAKE_CXX_COMPILER="${SAOBP_FUZZ_CXX:-clang++}")
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S fuzz -B "$dir" "${args[@]}" >/dev/null
ninja -C "$dir" -j "$(nproc)"
bash fuzz/seeds.sh "$dir/seeds"

harnesses=("$@")
if ((${#harnesses[@]} == 0)); then
  for f in fuzz/fuzz_*.cpp; do harnesses+=("$(basename "$f" .cpp | sed 's/^fuzz_//')"); done
fi
# leaks: a reader that throws must not leak either; libgomp/libomp threads are not started by
# the readers, so no suppressions are needed here.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The harnesses' scratch folders (fuzz/harness.h temp_root) go under a folder of this run, emptied
# after each harness: a harness removes its own at exit, but not when it dies on a finding.
# Every input is written there as files, so it sits in memory (/dev/shm) where the machine has
# it: on disk the file system's journal and writeback halve the executions per second (the race
# harness, 3000 inputs: 375 against 750 per second on the 2-core machine).
if [[ -d /dev/shm && -w /dev/shm ]]; then
  export TMPDIR=/dev/shm/saobp-fuzz-$$
else
  export TMPDIR=$PWD/$dir/tmp
fi
trap 'rm -rf "$TMPDIR"' EXIT
for h in "${harnesses[@]}"; do
  rm -rf "$TMPDIR"
  mkdir -p "$TMPDIR" "$dir/corpus/$h" "$dir/artifacts/$h" "$dir/seeds/$h" "fuzz/corpus/$h"
  echo "== fuzz $h (${secs}s)"
  # -max_len 65536: room for the larger fixture seeds; -timeout: seconds per input.
  if ! "$dir/fuzz_$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$dir/artifacts/$h/" \
    "$dir/corpus/$h" "$dir/seeds/$h" "fuzz/corpus/$h" >"$dir/fuzz_$h.log" 2>&1; then
    # The whole sanitizer or libFuzzer report (where the memory was freed and allocated comes
    # after the faulting stack), else the log's end.
    if grep -qE '^==[0-9]+== ?ERROR|runtime error:' "$dir/fuzz_$h.log"; then
      sed -nE '/^==[0-9]+== ?ERROR|runtime error:/,$p' "$dir/fuzz_$h.log" | head -250
    else
      tail -60 "$dir/fuzz_$h.log"
    fi
    echo "fuzz: $h found a problem; the input is in $dir/artifacts/$h/ (log: $dir/fuzz_$h.log)" >&2
    exit 1
  fi
  grep -E '^#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units|stat::peak_rss_mb' "$dir/fuzz_$h.log" | tr '\n' ' '
  echo
done
rm -rf "$TMPDIR"
