#!/usr/bin/env bash
# The CUDA backend on the emulated GPU (SAOBP_CUDA=EMU, tests/cuda_emu/README.md), on a machine
# without one: the whole backend, host halves and kernels, built for the CPU into build-emu/, then
#   1. the [cuda] tests (the paper-size bf16 trainings, [mini], left out: hours here) and the [emu]
#      kernel tests;
#   2. with `full`: the [cuda] tests again with the opt-in schedules switched on
#      (SAOBP_FUSED_ATTENTION=1, SAOBP_TILED_STAGED=1), then every command on the emulated GPU
#      beside the CPU (tests/train/gpu_commands.sh) in the default and the opt-in schedules.
# tools/test.sh runs step 1 (about 2 minutes of tests on 2 cores). It says the backend's logic is
# right before a GPU is lent; it says nothing of speed, nor of the device's own arithmetic (nvcc's
# FMA contraction, the device's expf and logf), which the [cuda] tests on a GPU settle.
# Usage: tools/emu_check.sh [quick|full]   (default quick)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-quick}
[[ $mode == quick || $mode == full ]] || { echo "usage: tools/emu_check.sh [quick|full]" >&2; exit 2; }
SAOBP_BUILD_DIR=build-emu SAOBP_CMAKE_ARGS="-DSAOBP_CUDA=EMU" bash tools/build.sh
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
