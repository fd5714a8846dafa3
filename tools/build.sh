#!/usr/bin/env bash
# The one build configuration that tools/quickstart.sh and tools/test.sh share: the CPU
# reference (Release, SAOBP_CUDA=OFF) in build/, compiled through ccache when it is installed.
# Running test.sh after quickstart.sh (or the other way round) therefore rebuilds nothing that
# is already built. Usage: tools/build.sh [ninja targets...] (all targets when none is named).
# SAOBP_BUILD_DIR and SAOBP_CMAKE_ARGS select another folder and extra CMake options (test.sh
# uses them for the CUDA compile check).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${SAOBP_BUILD_DIR:-build}
args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DSAOBP_CUDA=OFF)
if command -v ccache >/dev/null; then
  # Relative paths in the cache keys, so every checkout of the project shares one cache.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# shellcheck disable=SC2206  # SAOBP_CMAKE_ARGS is a list of options, split on spaces
args+=(${SAOBP_CMAKE_ARGS:-})
cmake -S . -B "$dir" "${args[@]}" >/dev/null
ninja -C "$dir" -j "$(nproc)" "$@"
# The vector extensions -march=native (SAOBP_NATIVE, on by default) lets the compiler use by
# itself, named as /proc/cpuinfo names them: tools/gpu_check.sh runs binaries carried to a GPU
# node only where its processor has them all. (Extensions reached only through intrinsics that
# the code does not call, such as AMD's SSE4a, are left out.)
if [[ " ${SAOBP_CMAKE_ARGS:-} " != *"-DSAOBP_NATIVE=OFF"* ]] && command -v gcc >/dev/null; then
  gcc -march=native -Q --help=target 2>/dev/null | awk '$2 == "[enabled]" {print $1}' |
    grep -x -E -- '-m(avx2|fma|f16c|bmi2|avx512(f|bw|vl|dq|cd))' | sed 's/^-m//' | tr '\n' ' ' \
    >"$dir/host_flags.txt" || true
fi
