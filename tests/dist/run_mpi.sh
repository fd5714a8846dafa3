#!/usr/bin/env bash
# Data-parallel training under mpirun (docs/distributed.md), end to end with tiny models:
#   1. a tiny BERT and a tiny GPT-2 trained 20 steps by 2 and by 3 ranks (train.reduce =
#      "ordered") end bitwise equal (weights and AdamW moments) to one process with grad_accum
#      multiplied by the rank count;
#   2. a run saved by 2 ranks resumes on 1 (grad_accum x 2), and one saved by 1 process resumes
#      on 2 ranks, each bitwise equal to the uninterrupted run;
#   3. resuming onto 3 ranks runs and logs that the global batch changed;
#   4. train.reduce = "fast" trains;
#   5. a rank killed with kill -9 ends the job, and the last checkpoint resumes.
# Usage: run_mpi.sh SAOBP_BINARY. A CTest entry when the build has MPI (about 30 s on 2 cores).
set -euo pipefail
saobp=$(realpath "$1")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
# Containers often forbid the cross-memory-attach single copy; plain shared memory works anywhere.
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "run_mpi: FAIL: $*" >&2
  exit 1
}
solo() { "$saobp" train "$@" >"$work/log" 2>&1 || fail "saobp train $*: $(tail -5 "$work/log")"; }
ranks() {
  local n=$1
  shift
  mpirun -np "$n" --oversubscribe --bind-to none "$saobp" train "$@" >"$work/log" 2>&1 ||
    fail "mpirun -np $n saobp train $*: $(tail -5 "$work/log")"
}
same() {  # same A B: two checkpoints (under $work) hold the same weights and moments, byte for byte
  local file
  for file in model.safetensors optimizer.safetensors; do
    cmp -s "$work/$1/$file" "$work/$2/$file" || fail "$1 and $2 differ in $file"
  done
  echo "run_mpi: $1 == $2 (bitwise)"
}

for family in bert gpt2; do
  cfg=$work/$family.toml
  cat >"$cfg" <<TOML
[model]
family = "$family"
preset = "custom"
vocab_size = 64
hidden = 16
layers = 2
heads = 2
intermediate = 32
max_positions = 16
attention = "bp_high"
[train]
seq_len = 12
batch_size = 4
max_steps = 20
warmup_steps = 2
lr = 3e-3
eval_every = 10
eval_batches = 2
log_every = 5
save_every = 10
[data]
kind = "synthetic"
TOML
  f=$family
  solo "$cfg" train.grad_accum=2 train.run_dir="$work/$f-1x2"
  cp -r "$work/$f-1x2/final" "$work/$f-uninterrupted"
  ranks 2 "$cfg" train.grad_accum=1 train.run_dir="$work/$f-2x1"
  same "$f-1x2/final" "$f-2x1/final"
  solo "$cfg" train.grad_accum=3 train.run_dir="$work/$f-1x3"
  ranks 3 "$cfg" train.grad_accum=1 train.run_dir="$work/$f-3x1"
  same "$f-1x3/final" "$f-3x1/final"
  [[ $(wc -l <"$work/$f-2x1/metrics.jsonl") -eq $(wc -l <"$work/$f-1x2/metrics.jsonl") ]] ||
    fail "$f: 2 ranks wrote another number of metrics lines than 1 process"
  # Resume (in the run's folder: the config hash covers train.run_dir) with another rank count
  # and the same micro-batches: bitwise the uninterrupted run.
  solo "$cfg" train.grad_accum=2 train.run_dir="$work/$f-2x1" --resume "$work/$f-2x1/checkpoint-10"
  same "$f-uninterrupted" "$f-2x1/final"
  ranks 2 "$cfg" train.grad_accum=1 train.run_dir="$work/$f-1x2" --resume "$work/$f-1x2/checkpoint-10"
  same "$f-uninterrupted" "$f-1x2/final"
done
cfg=$work/gpt2.toml

# Onto 3 ranks: another global batch, which the log says.
rm -r "$work/gpt2-1x2/final"
ranks 3 "$cfg" train.grad_accum=1 train.run_dir="$work/gpt2-1x2" --resume "$work/gpt2-1x2/checkpoint-10"
grep -q "the global batch changed" "$work/log" || fail "resuming onto 3 ranks did not log the change of batch"
[[ -f $work/gpt2-1x2/final/model.safetensors ]] || fail "resuming onto 3 ranks saved no final checkpoint"
echo "run_mpi: resume onto 3 ranks logs: $(grep -o 'the global batch changed[^;]*' "$work/log")"

ranks 2 "$cfg" train.grad_accum=1 train.reduce=fast train.run_dir="$work/fast"
grep -q "gradients summed fast" "$work/log" || fail "train.reduce=fast did not say so"
echo "run_mpi: reduce = fast trains"

# A rank killed midway: mpirun ends the job; the last checkpoint is whole and resumes.
mpirun -np 2 --oversubscribe --bind-to none "$saobp" train "$cfg" train.grad_accum=1 train.max_steps=100 \
  train.save_every=5 train.eval_every=0 train.run_dir="$work/killed" >"$work/killed.log" 2>&1 &
job=$!
for _ in $(seq 1200); do
  [[ -d $work/killed/checkpoint-10 ]] && break
  sleep 0.05
done
[[ -d $work/killed/checkpoint-10 ]] || fail "the run to kill saved no checkpoint-10: $(tail -5 "$work/killed.log")"
victim=""
for p in $(pgrep -P "$job"); do
  if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1; then victim=$p; fi
done
[[ -n $victim ]] || fail "no rank 1 among mpirun's children"
kill -9 "$victim"
if wait "$job"; then fail "mpirun exited 0 after rank 1 was killed"; fi
[[ ! -d $work/killed/final ]] || fail "the run finished before rank 1 was killed"
last=$(find "$work/killed" -maxdepth 1 -regex '.*/checkpoint-[0-9]+' -printf '%f\n' | sort -t- -k2 -n | tail -1)
[[ -n $last ]] || fail "no checkpoint left after the kill"
last=$work/killed/$last
solo "$cfg" train.grad_accum=2 train.max_steps=100 train.save_every=5 train.eval_every=0 \
  train.run_dir="$work/killed" --resume "$last"
[[ -f $work/killed/final/model.safetensors ]] || fail "the resumed run saved no final checkpoint"
echo "run_mpi: rank 1 killed (mpirun exited non-zero); resumed from $(basename "$last") to the end"
