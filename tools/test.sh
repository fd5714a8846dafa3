#!/usr/bin/env bash
# Installs what is missing, builds the CPU reference, runs every test (the CUDA backend's on an
# emulated GPU too); when nvcc is present also builds the CUDA backend (a compile check) and,
# when a GPU is present, runs the tests there.
set -euo pipefail
cd "$(dirname "$0")/.."
# chromium: the report test renders the HTML headless; fortunes: the real data of the fortunes
# topic task test; python3-torch: the Hugging Face layout
# check (tools/check_hf_layout.py) and tools/bench_pytorch.py; clang, libclang-rt-14-dev
# (libFuzzer) and libomp-dev: the fuzz stage (tools/fuzz.sh).
bash tools/deps.sh chromium python3-torch fortunes clang libclang-rt-14-dev libomp-dev

jobs=$(nproc)
# Each stage's heading carries the seconds since the start, so a log shows where CI's time went.
stage() { echo "== $* (at ${SECONDS} s)"; }
stage "format (.clang-format)"
bash tools/format.sh --check
stage "CPU build (Release, SAOBP_CUDA=OFF; tools/build.sh, shared with quickstart.sh)"
bash tools/build.sh
stage "CPU tests"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} ctest --test-dir build -j "$jobs" --output-on-failure

# The whole CUDA backend built for the CPU under the emulator (SAOBP_CUDA=EMU, build-emu/,
# tests/cuda_emu/README.md) and its [cuda] tests run on the emulated GPU: the backend's logic,
# host halves included, checked on a machine without a GPU. It shares the compiler cache with
# build/ above: only the GPU sources and the kernels' dispatchers compile anew.
stage "CUDA backend on the emulated GPU (tools/emu_check.sh)"
bash tools/emu_check.sh quick

# The unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer (docs/reliability.md):
# any report (out-of-bounds access, use after free, leak, signed overflow, misaligned or invalid
# load) fails the stage. Only saobp_tests is built, at -O1 (CMakeLists.txt's SAOBP_SANITIZE
# block). SAOBP_ASAN_TESTS, a Catch2 test spec, leaves out what is long under ASan's slowdown
# and runs no code the rest does not: the [slow] trainings, the [golden] trajectories (their
# kernels and optimizer are tested by [kernels], [attention], [autograd] and [train]) and
# [cuda] (no GPU code in this build).
stage "ASan + UBSan tests (build-asan, SAOBP_SANITIZE=address,undefined)"
SAOBP_BUILD_DIR=build-asan SAOBP_CMAKE_ARGS="-DSAOBP_SANITIZE=address,undefined" \
  bash tools/build.sh saobp_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OMP_NUM_THREADS=2 \
  build-asan/tests/saobp_tests "${SAOBP_ASAN_TESTS:-~[.]~[slow]~[golden]~[cuda]}"

# libFuzzer on every reader of untrusted files, 10 s each (tools/fuzz.sh, docs/reliability.md).
if command -v clang++ >/dev/null; then
  stage "fuzz (tools/fuzz.sh 10)"
  bash tools/fuzz.sh 10
else
  stage "clang++ not found: fuzzers not run"
fi

nvcc_bin=$(command -v nvcc || true)
[[ -z $nvcc_bin && -x /usr/local/cuda/bin/nvcc ]] && nvcc_bin=/usr/local/cuda/bin/nvcc
if [[ -n $nvcc_bin ]]; then
  stage "CUDA build (SAOBP_CUDA=ON, $($nvcc_bin --version | tail -1))"
  SAOBP_BUILD_DIR=build-cuda SAOBP_CMAKE_ARGS="-DSAOBP_CUDA=ON -DCMAKE_CUDA_COMPILER=$nvcc_bin" \
    bash tools/build.sh
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    stage "GPU tests"
    ctest --test-dir build-cuda -j 1 --output-on-failure
  else
    stage "no GPU here: CUDA backend compiled, GPU tests not run"
  fi
else
  stage "nvcc not found: CUDA backend not built"
fi
stage "all stages passed"
