#!/usr/bin/env bash
# Everything saobp checks on a GPU node, in one go and one log: the build (or a build made
# elsewhere), `saobp info`, the [cuda] tests (each CUDA kernel against its CPU twin, GPU training
# against the CPU's losses, bitwise reruns, checkpoints across devices), a training run, the kill
# test and data-parallel ranks on the GPU, the Hugging Face transformers check and the benchmarks
# side by side with PyTorch.
#
#   tools/gpu_check.sh [LOG]     LOG: default $OUT/gpu_check.log where $OUT is set, else
#                                build-cuda/gpu_check.log
#
# The build: where build-cuda/ holds a saobp and saobp_tests built on another x86-64 Linux
# machine (a connected one, with the same build dependencies) and `saobp info` runs here, they
# are used as they are (SAOBP_GPU_PREBUILT=0 forbids it); else the CUDA backend is built here
# into build-gpu/, with the Debian packages of .deps/ unpacked into a prefix of its own when the
# machine lacks them (an offline GPU node: tools/offline_deps.sh fetch --mpi where there is a
# network, then copy .deps/ along). Environment: SAOBP_GPU_JOBS (build jobs, default nproc),
# SAOBP_DEPS_PREFIX (where .deps/ is unpacked, default /tmp/saobp-deps), SAOBP_OFFLINE_DEPS=1 (use
# .deps/ even where the system has the packages), SAOBP_GPU_STAGES (a space-separated subset of:
# build info tests kernels train commands sanitize tiled kill mpi hf bench bf16 fused align torch; default
# all but tests, the CPU suite, which CI runs), SAOBP_GPU_TEST_SPEC (the Catch2 spec of the kernels
# stage, default [cuda]), SAOBP_GPU_SANITIZE_SPEC (the Catch2 spec of the tests under memcheck),
# SAOBP_GPU_TILED_RUNS (the tiled stage's runs as KERNELS:T, KERNELS true, staged (tiled with
# SAOBP_TILED_STAGED=1) or false; default true, staged, false at 2048 and 16384),
# SAOBP_GPU_LIMIT_<STAGE> (a stage's time limit in s, e.g. SAOBP_GPU_LIMIT_KERNELS=200). Each stage
# has a time limit; a failing stage is logged and the next one still runs. Binaries built elsewhere
# need only the runtime libraries: tools/offline_deps.sh fetch --mpi --runtime, which keeps what a
# device call carries small.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
log=${1:-${OUT:+$OUT/gpu_check.log}}
log=${log:-build-cuda/gpu_check.log}
mkdir -p "$(dirname "$log")"
log=$(realpath "$log")
out_dir=$(dirname "$log")
: >"$log"
stages=${SAOBP_GPU_STAGES:-build info kernels train commands sanitize tiled kill mpi hf bench bf16 fused align torch}
jobs=${SAOBP_GPU_JOBS:-$(nproc)}
failed=()
t_start=$SECONDS

say() { echo "$*" | tee -a "$log"; }
# stage NAME LIMIT_S CMD...: runs CMD into the log under a time limit; a failure is recorded.
stage() {
  local name=$1 limit=$2
  shift 2
  local limit_var=SAOBP_GPU_LIMIT_${name^^}  # SAOBP_GPU_LIMIT_KERNELS=200: a stage's limit in s
  limit=${!limit_var:-$limit}
  [[ " $stages " == *" $name "* ]] || return 0
  say "== $name ($((SECONDS - t_start)) s in): $*"
  local t0=$SECONDS
  if declare -F "$1" >/dev/null; then  # a function of this script: timeout runs programs only
    timeout -k 5 "$limit" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")" >>"$log" 2>&1
  else
    timeout -k 5 "$limit" "$@" >>"$log" 2>&1
  fi
  local rc=$?
  ((rc == 124)) && say "== $name: stopped at its limit of $limit s"
  say "== $name: rc $rc, $((SECONDS - t0)) s"
  ((rc == 0)) || failed+=("$name")
  return 0
}

# ---- dependencies: the system's, or .deps/ unpacked into a prefix ----------------------------
if [[ ${SAOBP_OFFLINE_DEPS:-0} == 1 ]] || ! [[ -f /usr/include/eigen3/Eigen/Core && -f /usr/include/toml++/toml.h ]]; then
  prefix=${SAOBP_DEPS_PREFIX:-/tmp/saobp-deps}
  if ! [[ -d $prefix/usr/lib ]]; then
    bash tools/offline_deps.sh unpack .deps "$prefix" >/dev/null 2>>"$log" || {
      say "gpu_check: no build dependencies: install them (tools/deps.sh) or bring .deps/ (tools/offline_deps.sh fetch)"
      exit 1
    }
  fi
  eval "$(bash tools/offline_deps.sh env "$prefix")"
  say "gpu_check: dependencies from $prefix (.deps/)"
fi
# CUDA's libraries (cuBLAS) where the toolkit keeps them.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d $d ]] && export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d
done

nvcc_bin=$(command -v nvcc || true)
[[ -z $nvcc_bin && -x /usr/local/cuda/bin/nvcc ]] && nvcc_bin=/usr/local/cuda/bin/nvcc
say "gpu_check: $(uname -n), $(nproc) cores, ${nvcc_bin:+$($nvcc_bin --version | tail -1)}"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap \
  --format=csv,noheader 2>&1 | tee -a "$log"

# ---- the binaries: carried, or built here ------------------------------------------------------
# A build made elsewhere runs here when it loads and this processor has every vector extension of
# the one it was compiled for (-march=native; build-cuda/host_flags.txt, written by tools/build.sh,
# lists them).
say "gpu_check: processor $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
isa_ok() {
  [[ -f build-cuda/host_flags.txt ]] || return 1
  local f missing=""
  for f in $(cat build-cuda/host_flags.txt); do
    grep -qw "$f" /proc/cpuinfo || missing+=" $f"
  done
  [[ -z $missing ]] || say "gpu_check: this processor lacks$missing: the build is made here"
  [[ -z $missing ]]
}
bin=""
if [[ ${SAOBP_GPU_PREBUILT:-1} == 1 && -x build-cuda/saobp ]] && isa_ok && build-cuda/saobp info >/dev/null 2>>"$log"; then
  bin=build-cuda
  # The tests find tests/fixtures and configs through the source folder compiled into them.
  src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build-cuda/CMakeCache.txt 2>/dev/null)
  if [[ -n $src && $src != "$root" && ! -e $src ]]; then
    mkdir -p "$(dirname "$src")" && ln -s "$root" "$src"
  fi
  say "gpu_check: the binaries of build-cuda/ (built elsewhere; sources linked at ${src:-?})"
  stages=$(echo " $stages " | sed 's/ build / /g')
else
  bin=build-gpu
  configure_and_build() {
    [[ -n $nvcc_bin ]] || {
      echo "gpu_check: nvcc not found"
      return 1
    }
    local args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DSAOBP_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc_bin")
    [[ -n ${PKG_CONFIG:-} ]] && args+=(-DPKG_CONFIG_EXECUTABLE="$PKG_CONFIG")
    cmake -S "$root" -B build-gpu "${args[@]}" && ninja -C build-gpu -j "$jobs"
  }
  stages="build $stages"
  stage build 900 configure_and_build
  if [[ " ${failed[*]} " == *" build "* ]]; then
    tail -40 "$log"
    say "gpu_check: the build failed (log: $log)"
    exit 1
  fi
fi
export saobp=$root/$bin/saobp bin work
work=$(mktemp -d)

stage info 60 "$saobp" info
stage tests 600 env OMP_NUM_THREADS=4 ctest --test-dir "$bin" -j 4 --output-on-failure
stage kernels 420 env OMP_NUM_THREADS=8 "$bin/tests/saobp_tests" "${SAOBP_GPU_TEST_SPEC:-[cuda]}" --durations yes

# A training run end to end (the quickstart model on synthetic data), with its log lines.
stage train 120 "$saobp" train configs/quickstart.toml data.kind=synthetic train.device=cuda train.max_steps=200 \
  train.eval_every=100 train.log_every=50 train.run_dir="$work/train"
# Every command on the GPU beside the CPU (tests/train/gpu_commands.sh).
stage commands 300 bash tests/train/gpu_commands.sh "$saobp"
# compute-sanitizer's memcheck over the kernel tests and three steps of a training run that uses
# every kernel of a step (RoPE, head skip, 2 BP steps, learnable lambda, Entropy-Reg).
gpu_sanitize() {
  local cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null) || {
    echo "no compute-sanitizer"
    return 1
  }
  # (not the out-of-memory case: the failed cudaMalloc it provokes is reported as an API error;
  # not the trainings: 300 steps under memcheck take minutes, and three steps of one follow)
  local spec="[cuda]~[train]~[finetune]~cuda bf16: BERT-Mini and GPT2-Mini*"
  spec+="~cuda runtime: out of memory is an error naming the sizes and the keys"
  "$cs" --tool memcheck --error-exitcode 9 "$bin/tests/saobp_tests" "${SAOBP_GPU_SANITIZE_SPEC:-$spec}" || return 1
  local family
  for family in bert gpt2; do
    "$cs" --tool memcheck --error-exitcode 9 "$saobp" train "" model.family=$family model.preset=custom \
      model.vocab_size=64 data.vocab_size=64 model.hidden=32 model.layers=2 model.heads=2 model.intermediate=64 \
      model.max_positions=32 model.attention=bp_high model.bp_steps=2 model.learnable_lambda=true \
      model.positions=rope model.skip_sinky_heads=true train.regularizer=entropy data.kind=synthetic \
      train.seq_len=16 train.batch_size=4 train.max_steps=3 train.warmup_steps=1 train.eval_every=0 train.log_every=1 \
      train.device=cuda train.run_dir="$work/sanitize-$family" --quiet || return 1
  done
}
stage sanitize 300 gpu_sanitize
# The tiled SAOBP kernels against the materialized ones in a whole run: GPT2-Mini, bp_high, B = 1,
# 2 steps at T = 2048 and 16384 (SAOBP_GPU_TILED_RUNS: model.tiled:T pairs), loss, gradient norm,
# step time and peak GPU memory of each (docs/performance.md, "The tiled SAOBP kernels on the GPU").
gpu_tiled() {
  local rc=0 run t tiled
  for run in ${SAOBP_GPU_TILED_RUNS:-true:2048 staged:2048 false:2048 true:16384 staged:16384 false:16384}; do
    tiled=${run%%:*} t=${run#*:}
    echo "-- tiled=$tiled T=$t"
    local staged=0
    [[ $tiled == staged ]] && tiled=true staged=1
    SAOBP_TILED_STAGED=$staged "$saobp" train configs/gpt2-mini.toml train.device=cuda model.attention=bp_high model.tiled="$tiled" \
      train.seq_len="$t" model.max_positions="$t" train.batch_size=1 data.kind=synthetic train.max_steps=2 \
      train.warmup_steps=1 train.eval_every=0 train.log_every=1 train.run_dir="$work/tiled-${run/:/-}" || rc=1
    cat "$work/tiled-${run/:/-}/metrics.jsonl" 2>/dev/null
  done
  # A 40 GiB card (train.memory_limit_gib = 40): at T = 16384 the materialized kernels are refused
  # (the run's estimate is past the limit), the tiled ones train within it.
  local o=(configs/gpt2-mini.toml train.device=cuda model.attention=bp_high train.seq_len=16384
    model.max_positions=16384 train.batch_size=1 data.kind=synthetic train.max_steps=2 train.warmup_steps=1
    train.eval_every=0 train.log_every=1 train.memory_limit_gib=40)
  echo "-- train.memory_limit_gib=40 T=16384: materialized (refused), then tiled"
  if "$saobp" train "${o[@]}" model.tiled=false train.run_dir="$work/limit-false" >"$work/limit.log" 2>&1; then
    echo "FAIL: the materialized run was not refused under the limit"
    rc=1
  fi
  cat "$work/limit.log"
  grep -q "train.memory_limit_gib" "$work/limit.log" || rc=1
  "$saobp" train "${o[@]}" model.tiled=true train.run_dir="$work/limit-true" || rc=1
  cat "$work/limit-true/metrics.jsonl" 2>/dev/null
  return $rc
}
stage tiled 300 gpu_tiled
# The kill test of the checkpoint swap, on the GPU.
stage kill 180 env SAOBP_TEST_DEVICE=cuda bash tests/train/kill_test.sh "$saobp"
# Two ranks sharing the GPU against one process with grad_accum 2: bitwise the same weights.
gpu_mpi() {
  command -v mpirun >/dev/null || {
    echo "no mpirun (bring .deps/ from tools/offline_deps.sh fetch --mpi)"
    return 1
  }
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  local rc=0 family
  for family in bert gpt2; do
    local o=(model.family=$family model.preset=custom model.vocab_size=64 data.vocab_size=64 model.hidden=32 model.layers=2
      model.heads=2 model.intermediate=64 model.max_positions=32 model.attention=bp_high data.kind=synthetic
      train.seq_len=16 train.batch_size=4 train.max_steps=20 train.warmup_steps=2 train.lr=3e-3
      train.eval_every=0 train.device=${MPI_DEVICE:-cuda} train.log_every=0)
    "$saobp" train configs/quickstart.toml "${o[@]}" train.grad_accum=2 train.run_dir="$work/mpi-$family-1" --quiet || return 1
    mpirun --oversubscribe --bind-to none -np 2 "$saobp" train configs/quickstart.toml "${o[@]}" train.grad_accum=1 \
      train.run_dir="$work/mpi-$family-2" --quiet || return 1
    for f in model.safetensors optimizer.safetensors; do
      if cmp -s "$work/mpi-$family-1/final/$f" "$work/mpi-$family-2/final/$f"; then
        echo "mpi $family: 2 ranks on ${MPI_DEVICE:-cuda} == 1 process with grad_accum 2 in $f (bitwise)"
      else
        echo "mpi $family: FAIL: 2 ranks and 1 process differ in $f"
        rc=1
      fi
    done
  done
  return $rc
}
stage mpi 120 gpu_mpi
# The real transformers library as a client of saobp's folders (python3 with torch, transformers).
stage hf 240 env PYTHONUNBUFFERED=1 python3 tools/check_hf_transformers.py --saobp "$saobp" --device cuda \
  --json "$out_dir/hf_check.json"
# saobp's GPU steps alone (Mini models, both attentions), then side by side with PyTorch.
gpu_bench() {
  local rc=0 config attention
  for config in configs/bert-mini.toml configs/gpt2-mini.toml; do
    for attention in original bp_high; do
      "$saobp" bench "$config" train.device=cuda model.attention=$attention data.kind=synthetic --profile || rc=1
    done
  done
  return $rc
}
stage bench 120 gpu_bench
# train.precision = bf16 against f32 (docs/precision.md): the Medium models at T = 512 (the MFU
# target of issue 23: 40% of the bf16 peak), both attentions, and the Mini models' bp_high.
gpu_bf16() {
  local rc=0 config attention precision
  for config in configs/bert-medium.toml configs/gpt2-medium.toml; do
    for attention in original bp_high; do
      for precision in f32 bf16; do
        "$saobp" bench "$config" train.device=cuda model.attention=$attention train.seq_len=512 \
          train.precision=$precision data.kind=synthetic || rc=1
      done
    done
  done
  for config in configs/bert-mini.toml configs/gpt2-mini.toml; do
    "$saobp" bench "$config" train.device=cuda model.attention=bp_high train.precision=bf16 data.kind=synthetic || rc=1
  done
  return $rc
}
stage bf16 200 gpu_bf16
# The attention's fused schedule (SAOBP_FUSED_ATTENTION=1) against the unfused one (0, the
# default and the baseline in the same run; src/attention/cuda/attention.cu), original and bp_high
# in bf16: the Medium models at T = 512 (issue 23's bp_high / original target of 1.25x) and the
# Mini models at T = 128 (1.15x).
gpu_fused() {
  local rc=0 run config t attention fused
  for run in bert-medium:512 gpt2-medium:512 bert-mini:128 gpt2-mini:128; do
    config=configs/${run%%:*}.toml t=${run#*:}
    local o=(train.device=cuda train.seq_len="$t" train.precision=bf16 data.kind=synthetic)
    for attention in original bp_high; do
      for fused in 0 1; do
        echo "-- $run $attention SAOBP_FUSED_ATTENTION=$fused"
        SAOBP_FUSED_ATTENTION=$fused "$saobp" bench "$config" "${o[@]}" model.attention=$attention || rc=1
      done
    done
  done
  # The LM head's logits rows padded to a multiple of 64 (the default) against unpadded.
  for pad in 1 0; do
    echo "-- gpt2-medium:512 original SAOBP_PAD_LOGITS=$pad, profiled"
    SAOBP_PAD_LOGITS=$pad "$saobp" bench configs/gpt2-medium.toml train.device=cuda train.seq_len=512 \
      train.precision=bf16 data.kind=synthetic model.attention=original --profile || rc=1
  done
  # The memory baseline: the graph keeping every activation's data until the backward
  # (docs/performance.md, "Activation memory"); its peak against the runs above.
  echo "-- gpt2-medium:512 original SAOBP_KEEP_GRAPH_DATA=1"
  SAOBP_KEEP_GRAPH_DATA=1 "$saobp" bench configs/gpt2-medium.toml train.device=cuda train.seq_len=512 \
    train.precision=bf16 data.kind=synthetic model.attention=original || rc=1
  echo "-- gpt2-medium:512 bp_high, fused, profiled"
  SAOBP_FUSED_ATTENTION=1 "$saobp" bench configs/gpt2-medium.toml train.device=cuda train.seq_len=512 train.precision=bf16 \
    data.kind=synthetic model.attention=bp_high --profile || rc=1
  return $rc
}
stage fused 300 gpu_fused
# The LM heads' bf16 GEMMs in PyTorch at the vocabulary and padded to a multiple of 64 (GPT-2's
# 50257, BERT's 30522: rows that are not 16-byte aligned), a few seconds.
stage align 120 env PYTHONUNBUFFERED=1 python3 tools/bench_gemm_align.py --json "$out_dir/gemm_align.json"
stage torch 420 env SAOBP="$saobp" bash tools/bench_gpu.sh "$out_dir/bench_gpu.md"

rm -rf "$work"
say "gpu_check: stages run: $stages; failed: ${failed[*]:-none}; $((SECONDS - t_start)) s (log: $log)"
((${#failed[@]} == 0))
