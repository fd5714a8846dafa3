#!/usr/bin/env bash
# Data-parallel throughput on one machine (docs/distributed.md): for each config, 2 ranks x 1
# thread (mpirun), under train.reduce = "ordered" and "fast", against 1 process x 2 threads with
# grad_accum doubled (the same global batch and the same weights), side by side in one run, and
# the share of the 2-rank step spent in the sum after the backward (comm_ms_per_step of
# metrics.jsonl: the transfer plus the wait for the slower rank; under fast, what the backward
# did not hide). Medians over the logged steps after the first.
# Figures need a quiet machine: nothing else running.
# Usage: tools/bench_mpi.sh [STEPS] (default 20); SAOBP_BENCH_CONFIGS="a.toml b.toml" overrides
# the configs (default: the quickstart and BERT-Mini on synthetic data).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
saobp=build/saobp
[[ -x $saobp ]] || bash tools/build.sh saobp
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

declare -A extra=([configs/quickstart.toml]="" [configs/bert-mini.toml]="data.kind=synthetic")
configs=${SAOBP_BENCH_CONFIGS:-configs/quickstart.toml configs/bert-mini.toml}
# median KEY FILE: the median of KEY over the metrics lines after the first
median() {
  python3 -c 'import json,sys,statistics
v=[json.loads(l)[sys.argv[1]] for l in open(sys.argv[2]) if sys.argv[1] in l][1:]
print(f"{statistics.median(v):.1f}" if v else "n/a")' "$1" "$2"
}
printf '%-20s %8s %14s %14s %7s %11s\n' config reduce "1x2 tokens/s" "2x1 tokens/s" ratio "sum share"
for cfg in $configs; do
  # shellcheck disable=SC2206  # extra overrides are a list
  common=(train.max_steps="$steps" train.warmup_steps=1 train.log_every=1 train.eval_every=0 train.save_every=0
    ${extra[$cfg]:-})
  accum=$(sed -n 's/^grad_accum *= *\([0-9]*\).*/\1/p' "$cfg")
  accum=${accum:-1}
  OMP_NUM_THREADS=2 "$saobp" train "$cfg" "${common[@]}" train.threads=2 train.grad_accum=$((2 * accum)) \
    train.run_dir="$work/one" --quiet >/dev/null
  one=$(median tokens_per_s "$work/one/metrics.jsonl")
  for reduce in ordered fast; do
    OMP_NUM_THREADS=1 mpirun -np 2 --bind-to core "$saobp" train "$cfg" "${common[@]}" train.threads=1 \
      train.grad_accum="$accum" train.reduce="$reduce" train.run_dir="$work/two" --quiet >/dev/null
    two=$(median tokens_per_s "$work/two/metrics.jsonl")
    comm=$(median comm_ms_per_step "$work/two/metrics.jsonl")
    step=$(median ms_per_step "$work/two/metrics.jsonl")
    share=$(python3 -c "print(f'{100*float(\"$comm\")/float(\"$step\"):.1f}%')")
    printf '%-20s %8s %14s %14s %7s %11s\n' "$(basename "$cfg")" "$reduce" "$one" "$two" \
      "$(python3 -c "print(f'{float(\"$two\")/float(\"$one\"):.2f}x')")" "$share"
    rm -rf "$work/two"
  done
  rm -rf "$work/one"
done
