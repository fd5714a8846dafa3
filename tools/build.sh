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
