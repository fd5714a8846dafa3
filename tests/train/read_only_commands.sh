#!/usr/bin/env bash
# Read-only commands write nothing into the checkpoint they read: `saobp eval`, `analyze --out`
# and `inspect` (whose dump goes to the working directory by default) on a tiny trained run leave
# every file of the run folder as it was (names and bytes). So does `eval` of a long-range task's
# checkpoint (a RoPE GPT-2 on count_ones) at other lengths, one of them past the model.max_positions
# it was trained with (raised by the override), which it prints: the task_eval.json of training
# stays. A bf16 GPU run's checkpoint is read on the CPU in f32 with --device cpu.
# Usage: read_only_commands.sh PATH/TO/saobp. About 1 s.
set -euo pipefail
saobp=$(realpath "$1")
work=$(mktemp -d "${TMPDIR:-/tmp}/saobp-read-only.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$saobp" train "" model.family=bert model.preset=custom model.hidden=16 model.intermediate=32 model.layers=1 \
  model.heads=2 model.vocab_size=64 model.max_positions=16 data.kind=synthetic train.batch_size=2 \
  train.seq_len=8 train.max_steps=2 train.warmup_steps=1 train.eval_every=0 train.save_every=0 \
  train.run_dir="$work/run" --quiet >"$work/train.log" 2>&1 || {
  cat "$work/train.log" >&2
  exit 1
}
"$saobp" train "" data.kind=task data.task=count_ones model.family=gpt2 model.positions=rope \
  model.preset=custom model.vocab_size=33 model.hidden=16 model.intermediate=32 model.layers=1 model.heads=2 \
  model.max_positions=16 train.batch_size=4 train.seq_len=12 train.max_steps=2 train.warmup_steps=1 \
  train.eval_every=0 train.save_every=0 train.eval_batches=1 "data.eval_lengths=[8, 32]" \
  train.run_dir="$work/task" --quiet >"$work/train-task.log" 2>&1 || {
  cat "$work/train-task.log" >&2
  exit 1
}
listing() { (cd "$work" && find run task -type f -print0 | sort -z | xargs -0 sha256sum); }
before=$(listing)
mkdir "$work/wd"
(
  cd "$work/wd"
  "$saobp" eval --checkpoint "$work/run/final" >/dev/null
  "$saobp" analyze --checkpoint "$work/run/final" --samples 2 --out "$work/wd/analysis" >/dev/null
  "$saobp" inspect --checkpoint "$work/run/final" --ids 2,3,4 >/dev/null
  "$saobp" eval --checkpoint "$work/task/final" "data.eval_lengths=[12, 32]" model.max_positions=32 >"$work/eval-task.txt"
)
grep -Eq '^ +32 +[0-9.]+ +[0-9.]+ +4$' "$work/eval-task.txt" || {
  echo "eval of the task checkpoint printed no accuracy at length 32:" >&2
  cat "$work/eval-task.txt" >&2
  exit 1
}
[[ -s $work/wd/inspect.safetensors ]] || {
  echo "inspect wrote no inspect.safetensors into the working directory" >&2
  exit 1
}
# A checkpoint of a bf16 run on a GPU (its config.toml says so; checksums.json follows) is read on
# the CPU with --device cpu, in f32: eval succeeds and prints the same loss as the f32 run's.
cp -r "$work/run/final" "$work/gpu-bf16"
python3 - "$work/gpu-bf16" <<'PY'
import json, pathlib, re, sys
d = pathlib.Path(sys.argv[1])
t = (d / "config.toml").read_text()
t = re.sub(r'\ndevice = "cpu"\n', '\ndevice = "cuda"\n', t)
t = re.sub(r'\nprecision = "f32"\n', '\nprecision = "bf16"\n', t)
assert 'precision = "bf16"' in t and 'device = "cuda"' in t, t
(d / "config.toml").write_text(t)
h = 0xcbf29ce484222325
for b in t.encode():
    h = ((h ^ b) * 0x100000001b3) % (1 << 64)
c = json.loads((d / "checksums.json").read_text())
c["files"]["config.toml"] = f"{h:016x}"
(d / "checksums.json").write_text(json.dumps(c, indent=2) + "\n")
PY
(cd "$work/wd" && "$saobp" eval --checkpoint "$work/gpu-bf16" --device cpu >"$work/eval-bf16.txt" 2>&1) || {
  echo "eval --device cpu of a bf16 GPU run's checkpoint failed:" >&2
  cat "$work/eval-bf16.txt" >&2
  exit 1
}
(cd "$work/wd" && "$saobp" eval --checkpoint "$work/run/final" >"$work/eval-f32.txt" 2>&1)
[[ $(grep -o 'loss [0-9.]*' "$work/eval-bf16.txt") == $(grep -o 'loss [0-9.]*' "$work/eval-f32.txt") ]] || {
  echo "eval --device cpu of the bf16 checkpoint and of the f32 one differ:" >&2
  cat "$work/eval-bf16.txt" "$work/eval-f32.txt" >&2
  exit 1
}
after=$(listing)
if [[ $before != "$after" ]]; then
  echo "a read-only command changed the run folder:" >&2
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
echo "read-only commands: the run folders are unchanged; inspect wrote to the working directory"
