#!/usr/bin/env bash
# Data-parallel training under mpirun (docs/distributed.md), end to end with tiny models:
#   1. a tiny BERT and a tiny GPT-2 trained 20 steps by 2 and by 3 ranks (train.reduce =
#      "ordered") end bitwise equal (weights and AdamW moments) to one process with grad_accum
#      multiplied by the rank count; GPT-2's 2-rank run sees only PMIx's variables (what
#      `srun --mpi=pmix` gives a rank: OpenMPI's OMPI_COMM_WORLD_* and PMI-1/2's removed);
#   2. train.reduce = "fast" (the all-reduce overlapping the backward) on 2 ranks, in buckets
#      small enough to be several, starts them all during the backward and is bitwise equal to one
#      process with grad_accum 2 as well, for both (a sum of two terms is the same in either
#      order); 3 ranks x grad_accum 2 under fast (one bucket) train to a finite loss;
#   3. a run saved by 2 ranks resumes on 1 (grad_accum x 2), and one saved by 1 process resumes
#      on 2 ranks, each bitwise equal to the uninterrupted run; resuming onto 3 ranks runs and
#      logs that the global batch changed;
#   4. fine-tuning (glue/sst2 on the fixtures, from a tiny BERT pretrained here) on 2 ranks
#      writes the model and results.json metrics of one process with grad_accum 2, byte for
#      byte; `eval --task` on 2 ranks gives one process's metrics and only rank 0 writes (the
#      ranks run in separate folders); `saobp study` on 2 ranks (runs shared out, fine-tuning
#      included) writes one process's study.json, study.csv and study.md, byte for byte;
#   5. a rank killed with kill -9 ends the job, and the last checkpoint resumes.
# Usage: run_mpi.sh SAOBP_BINARY. A CTest entry when the build has MPI.
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
mpi() { mpirun --oversubscribe --bind-to none "$@"; }
ranks() {  # ranks N [--pmix-only] ARGS...: saobp train ARGS on N ranks
  local n=$1 launch=()
  shift
  if [[ $1 == --pmix-only ]]; then launch=("$work/pmix-only"), shift; fi
  mpi -np "$n" "${launch[@]}" "$saobp" train "$@" >"$work/log" 2>&1 ||
    fail "mpirun -np $n saobp train $*: $(tail -5 "$work/log")"
}
# A rank's environment as `srun --mpi=pmix` leaves it: PMIx's variables, none of the others that
# saobp's launch detection reads (src/dist/mpi/comm.cpp) or that OpenMPI sets per rank.
cat >"$work/pmix-only" <<'SH'
#!/usr/bin/env bash
[[ -n ${PMIX_RANK:-} ]] || { echo "pmix-only: no PMIX_RANK from the launcher" >&2; exit 1; }
for v in $(compgen -e); do
  case $v in OMPI_COMM_WORLD_* | OMPI_UNIVERSE_SIZE | PMI_*) unset "$v" ;; esac
done
exec "$@"
SH
chmod +x "$work/pmix-only"
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
  launch=()
  [[ $f == gpt2 ]] && launch=(--pmix-only)
  ranks 2 "${launch[@]}" "$cfg" train.grad_accum=1 train.run_dir="$work/$f-2x1"
  grep -q "2 ranks x 1 micro-batches" "$work/log" || fail "$f: the 2-rank run did not run as 2 ranks"
  same "$f-1x2/final" "$f-2x1/final"
  # Buckets of 4 KB (about 1000 floats, of some 6000 parameters): several, started in order as
  # the backward makes them whole. The backward reaches every parameter, so every bucket starts
  # before it returns (the last one, holding the embeddings, right after their node).
  ranks 2 "$cfg" train.grad_accum=1 train.reduce=fast train.bucket_mb=0.004 train.run_dir="$work/$f-fast"
  buckets=$(grep -o 'gradients summed fast ([0-9]* bucket' "$work/log" | grep -o '[0-9]*') ||
    fail "train.reduce=fast did not say so"
  python3 -c 'import json, sys
n = [json.loads(l).get("buckets_overlapped") for l in open(sys.argv[1]) if "\"loss\"" in l]
assert int(sys.argv[2]) > 1 and n and all(x == int(sys.argv[2]) for x in n), n' \
    "$work/$f-fast/metrics.jsonl" "$buckets" || fail "$f under fast: not all $buckets buckets started during the backward"
  same "$f-1x2/final" "$f-fast/final"
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

ranks 3 "$cfg" train.grad_accum=2 train.reduce=fast train.run_dir="$work/fast-3x2"
python3 -c 'import json, math, sys
losses = [json.loads(l)["loss"] for l in open(sys.argv[1]) if "\"loss\"" in l]
assert losses and all(math.isfinite(x) for x in losses), losses' "$work/fast-3x2/metrics.jsonl" ||
  fail "3 ranks x grad_accum 2 under fast: no finite loss"
echo "run_mpi: reduce = fast on 3 ranks x grad_accum 2 trains"

# Fine-tuning, evaluation and studies. A tiny BERT pretrained on the GLUE fixtures' sentences
# (every line a document, so the held-out fraction has documents) with its own vocabulary.
fixtures=$(realpath "$(dirname "$0")/../fixtures")
find "$fixtures/glue/SST-2" "$fixtures/glue/STS-B" "$fixtures/glue/RTE" -type f -print0 | LC_ALL=C sort -z |
  xargs -0 cat | awk 'NF { print; print "" }' >"$work/corpus.txt"
pretrain=(model.attention=original data.kind=text data.path="$work/corpus.txt" data.valid_fraction=0.2
  model.vocab_size=400 data.vocab_size=400 model.hidden=16 model.layers=2 model.heads=2 model.intermediate=32
  model.max_positions=64 train.seq_len=32 train.batch_size=8 train.max_steps=4 train.warmup_steps=1
  train.eval_every=4 train.eval_batches=1 train.log_every=0 train.save_every=0)
solo "$(dirname "$0")/../../configs/quickstart.toml" "${pretrain[@]}" train.run_dir="$work/pre"
tune=(--init "$work/pre/final" --task glue/sst2 --data "$fixtures/glue" train.epochs=2 train.batch_size=1
  train.seq_len=48 train.log_every=1)
"$saobp" finetune "${tune[@]}" train.grad_accum=2 train.run_dir="$work/ft-1x2" >"$work/log" 2>&1 ||
  fail "saobp finetune: $(tail -5 "$work/log")"
mpi -np 2 "$saobp" finetune "${tune[@]}" train.grad_accum=1 train.run_dir="$work/ft-2x1" >"$work/log" 2>&1 ||
  fail "mpirun -np 2 saobp finetune: $(tail -5 "$work/log")"
# metrics A B: the "metrics" of two results.json files, equal as text
metrics() {
  python3 -c 'import json, sys
a, b = (json.dumps(json.load(open(f))["metrics"], sort_keys=True) for f in sys.argv[1:])
assert a == b, (a, b)
print(a)' "$1" "$2" || fail "$1 and $2 hold different metrics"
}
cmp -s "$work/ft-1x2/final/model.safetensors" "$work/ft-2x1/final/model.safetensors" ||
  fail "fine-tuning on 2 ranks differs from one process with grad_accum 2 in model.safetensors"
echo "run_mpi: finetune glue/sst2 on 2 ranks == 1 process x grad_accum 2 (bitwise), metrics $(metrics \
  "$work/ft-1x2/results.json" "$work/ft-2x1/results.json")"

# eval --task: the ranks in folders of their own (MPMD), the output path relative.
check=(eval --checkpoint "$work/ft-1x2/final" --task glue/sst2 --data "$fixtures/glue" --out out/results.json)
mkdir -p "$work/eval-1" "$work/eval-r0" "$work/eval-r1"
(cd "$work/eval-1" && "$saobp" "${check[@]}") >"$work/log" 2>&1 || fail "saobp eval: $(tail -5 "$work/log")"
mpi -np 1 -wdir "$work/eval-r0" "$saobp" "${check[@]}" : -np 1 -wdir "$work/eval-r1" "$saobp" "${check[@]}" \
  >"$work/log" 2>&1 || fail "mpirun -np 2 saobp eval: $(tail -5 "$work/log")"
[[ -z $(ls -A "$work/eval-r1") ]] || fail "eval under mpirun: rank 1 wrote $(ls -A "$work/eval-r1")"
echo "run_mpi: eval --task on 2 ranks: rank 0 alone writes; metrics $(metrics \
  "$work/eval-1/out/results.json" "$work/eval-r0/out/results.json")"

# A study of 2 seeds, each pretrained and then fine-tuned: 4 runs, 2 per rank.
cat >"$work/study.toml" <<TOML
[study]
name = "mpi"
base = "$(realpath "$(dirname "$0")/../../configs/quickstart.toml")"
seeds = [1, 2]
overrides = [$(printf '"%s", ' "${pretrain[@]}")"train.threads=1"]
[[finetune]]
task = "glue/sst2"
data = "$fixtures/glue"
overrides = ["train.epochs=1", "train.batch_size=2", "train.seq_len=48", "train.threads=1", "train.log_every=0"]
TOML
"$saobp" study "$work/study.toml" --out "$work/study-1" >"$work/log" 2>&1 ||
  fail "saobp study: $(tail -5 "$work/log")"
mpi -np 2 "$saobp" study "$work/study.toml" --out "$work/study-2" >"$work/log" 2>&1 ||
  fail "mpirun -np 2 saobp study: $(tail -5 "$work/log")"
for file in study.json study.csv study.md; do
  cmp -s "$work/study-1/$file" "$work/study-2/$file" || fail "study on 2 ranks: $file differs from 1 process"
done
echo "run_mpi: study on 2 ranks == 1 process (study.json, study.csv, study.md byte for byte)"

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
