#!/usr/bin/env bash
# The CUDA backend on the emulated GPU (SAOBP_CUDA=EMU, tests/cuda_emu/README.md), on a machine
# without one: the whole backend, host halves and kernels, built for the CPU into build-emu/, then
#   1. the [cuda] tests (the paper-size bf16 trainings, [mini], left out: hours here) and the [emu]
#      kernel tests;
#   2. with `full`: the [cuda] tests again with the opt-in schedules switched on
#      (SAOBP_FUSED_ATTENTION=1, SAOBP_TILED_STAGED=1), then every command on the emulated GPU
#      beside the CPU (tests/train/gpu_commands.sh) in the default and the opt-in schedules.
# With `asan`: step 1's [cuda] tests in a build of its own (build-emu-asan/) under AddressSanitizer
# and UndefinedBehaviorSanitizer, the host halves' memory use and the kernels' alike (a 16-minute
# build and 13 minutes of tests on 2 cores).
# tools/test.sh runs step 1 (about 2 minutes of tests on 2 cores). It says the backend's logic is
# right before a GPU is lent; it says nothing of speed, nor of the device's own arithmetic (nvcc's
# FMA contraction, the device's expf and logf), which the [cuda] tests on a GPU settle.
# Usage: tools/emu_check.sh [quick|full|asan]   (default quick)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-quick}
[[ $mode =~ ^(quick|full|asan)$ ]] || { echo "usage: tools/emu_check.sh [quick|full|asan]" >&2; exit 2; }
if [[ $mode == asan ]]; then
  SAOBP_BUILD_DIR=build-emu-asan SAOBP_CMAKE_ARGS="-DSAOBP_CUDA=EMU -DSAOBP_SANITIZE=address,undefined" \
    bash tools/build.sh saobp_tests
  echo "== [cuda] tests on the emulated GPU under ASan + UBSan"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} \
    build-emu-asan/tests/saobp_tests "[cuda]~[mini]"
  exit 0
fi
targets=(saobp_tests)
[[ $mode == full ]] && targets+=(saobp)
SAOBP_BUILD_DIR=build-emu SAOBP_CMAKE_ARGS="-DSAOBP_CUDA=EMU" bash tools/build.sh "${targets[@]}"
tests=build-emu/tests/saobp_tests
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
echo "== [cuda] and [emu] tests on the emulated GPU"
"$tests" "[cuda]~[mini],[emu]"
[[ $mode == full ]] || exit 0
echo "== [cuda] tests with SAOBP_FUSED_ATTENTION=1 SAOBP_TILED_STAGED=1"
SAOBP_FUSED_ATTENTION=1 SAOBP_TILED_STAGED=1 "$tests" "[cuda]~[mini]"
echo "== every command on the emulated GPU beside the CPU"
bash tests/train/gpu_commands.sh build-emu/saobp
echo "== every command, SAOBP_FUSED_ATTENTION=1 SAOBP_TILED_STAGED=1"
SAOBP_FUSED_ATTENTION=1 SAOBP_TILED_STAGED=1 bash tests/train/gpu_commands.sh build-emu/saobp
