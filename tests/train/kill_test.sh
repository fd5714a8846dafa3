#!/usr/bin/env bash
# Kill test (the swap of src/train/checkpoint.h): a tiny training run is killed with SIGKILL inside its saves, at
# every point of the swap (files written, checksums written, between the two renames, after the
# swap) in turn, ten times, each time resumed with `--resume` (no value: the
# latest complete checkpoint) or, to reach the point between the renames, from an older
# checkpoint (so that its later saves replace existing folders); the save to stop in is drawn with
# a fixed seed. After each kill the checkpoint being saved must load (`saobp eval`, which must leave
# the run directory byte-identical), and the run finished by `--resume` must end with final
# weights bitwise identical to an uninterrupted run's. The test-only hook
# SAOBP_TEST_PAUSE_IN_SAVE=POINT:N (train/checkpoint.h) stops the Nth save at POINT to be killed.
# Usage: kill_test.sh PATH/TO/saobp (SAOBP_TEST_DEVICE=cuda: the runs train on the GPU, as
# tools/gpu_check.sh does). About 4 s of CPU time; 35 s of wall time were measured on a 2-core
# machine shared with other builds (the processes start, pause and wait to be killed).
set -euo pipefail
saobp=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/saobp-kill-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat >"$work/run.toml" <<'TOML'
[model]
family = "bert"
preset = "custom"
vocab_size = 64
hidden = 16
layers = 1
heads = 2
intermediate = 32
max_positions = 16
attention = "bp_high"
[data]
kind = "synthetic"
mlm_probability = 0.3
[train]
seq_len = 12
batch_size = 4
max_steps = 60
warmup_steps = 2
save_every = 2
eval_every = 0
log_every = 1
grad_accum = 2
eval_batches = 1
threads = 1
TOML
echo "device = \"${SAOBP_TEST_DEVICE:-cpu}\"" >>"$work/run.toml"
run=$work/run
fail() {
  echo "kill test: $*" >&2
  [ -f "$work/log" ] && sed 's/^/  | /' "$work/log" >&2
  exit 1
}
hashes() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }

"$saobp" train "$work/run.toml" "train.run_dir=$work/ref" --quiet >"$work/log" 2>&1 || fail "the reference run failed"

RANDOM=14
points=(files-written before-swap between-renames after-swap)
kills=0
for ((i = 0; i < 10; i++)); do
  point=${points[i % 4]}
  n=$((1 + RANDOM % 2))
  if ((i == 0)); then
    args=() n=2 # a fresh run; its first save completes, so there is something to resume
  elif [ "$point" = between-renames ] && [ -d "$run/checkpoint-2" ]; then
    args=(--resume "$run/checkpoint-2") n=1 # its first save replaces checkpoint-4
  else
    args=(--resume)
  fi
  # Emptied here, before the start: the child truncates the log only once it runs, and until then
  # the loop below would find the previous try's pause line in it (and kill the new run early).
  : >"$work/log"
  SAOBP_TEST_PAUSE_IN_SAVE="$point:$n" "$saobp" train "$work/run.toml" "train.run_dir=$run" --quiet \
    "${args[@]}" >"$work/log" 2>&1 &
  pid=$!
  paused=
  for ((t = 0; t < 1200; t++)); do
    if grep -q "test pause at" "$work/log"; then
      paused=1
      kill -KILL "$pid"
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  status=0
  { wait "$pid"; } 2>/dev/null || status=$?
  if [ -z "$paused" ]; then
    [ "$status" = 0 ] || fail "try $i (${args[*]:-fresh}) exited with $status without reaching $point:$n"
    echo "try $i: ${args[*]:-fresh}: finished before $point of save $n"
    continue
  fi
  kills=$((kills + 1))
  echo "try $i: ${args[*]:-fresh}: killed at $point of save $n"
  saving=$(sed -n 's/.*test pause at .* (\(.*\))$/\1/p' "$work/log")
  # Past files-written the save's checksums are complete: whatever the swap left must load.
  if [ "$point" != files-written ]; then
    before=$(hashes "$run")
    "$saobp" eval --checkpoint "$saving" >"$work/log" 2>&1 || fail "try $i: $saving does not load after a kill at $point"
    [ "$before" = "$(hashes "$run")" ] || fail "try $i: eval changed the run directory"
  fi
done
((kills >= 6)) || fail "only $kills of 10 tries were killed inside a save"

"$saobp" train "$work/run.toml" "train.run_dir=$run" --quiet --resume >"$work/log" 2>&1 || fail "the last --resume failed"
cmp "$work/ref/final/model.safetensors" "$run/final/model.safetensors" || fail "the final weights differ"
cmp "$work/ref/final/optimizer.safetensors" "$run/final/optimizer.safetensors" || fail "the final moments differ"
if find "$run" -name '*.tmp-*' -o -name '*.old-*' -o -name '*.tmp.*' | grep -q .; then
  fail "leftovers remain: $(find "$run" -name '*.tmp-*' -o -name '*.old-*' -o -name '*.tmp.*')"
fi
# Re-running into the finished run without --resume or --overwrite is refused, and nothing changes.
before=$(hashes "$run")
if "$saobp" train "$work/run.toml" "train.run_dir=$run" --quiet >"$work/log" 2>&1; then
  fail "a new run into a finished run directory was accepted"
fi
grep -q -- "--resume" "$work/log" && grep -q -- "--overwrite" "$work/log" && grep -qF "$run" "$work/log" ||
  fail "the refusal does not name the directory and both options"
[ "$before" = "$(hashes "$run")" ] || fail "the refused run changed the run directory"
"$saobp" train "$work/run.toml" "train.run_dir=$run" --quiet --overwrite >"$work/log" 2>&1 || fail "--overwrite failed"
cmp "$work/ref/final/model.safetensors" "$run/final/model.safetensors" || fail "the overwritten run differs"
echo "kill test: $kills kills inside saves, final weights identical"
