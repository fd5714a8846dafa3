#!/usr/bin/env bash
# CTest entry (the acceptance test of `saobp study`): runs configs/studies/tiny.toml (2 variants x
# 2 seeds) whole with --jobs 2, and again with --jobs 1 into another folder, killing that study
# (SIGKILL) while a run is midway (it has a checkpoint and no results), then resuming it: the
# resumed study must write the same study.json, study.csv and study.md, byte for byte, start the
# interrupted run from its checkpoint, and leave no child process of the killed study behind.
# A third call finds every run finished and redoes none; a fourth, from the study file edited,
# refuses the runs trained with the old config. Then a study with a fine-tuning task:
# 2 seeds of a tiny BERT pretrained on the GLUE fixtures' sentences, each fine-tuned on the SST-2
# fixture, whose table has the task's cell and whose runs `saobp correlate` pairs with their
# pretraining runs. About 15 s in all on the 2-core machine.
#   tools/check_study.sh SAOBP_BINARY
set -euo pipefail
saobp=$1
root=$(cd "$(dirname "$0")/.." && pwd)
study=$root/configs/studies/tiny.toml
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
die() {
  echo "check_study: $*" >&2
  exit 1
}

"$saobp" study "$study" --out "$dir/whole" --jobs 2 >"$dir/whole.log" 2>&1 || die "$(cat "$dir/whole.log")"

"$saobp" study "$study" --out "$dir/killed" --jobs 1 >"$dir/killed.log" 2>&1 &
pid=$!
# A complete checkpoint is a folder checkpoint-N (the trainer writes checkpoint-N.tmp-PID first).
checkpoints() { find "$1" -mindepth 1 -maxdepth 1 -type d -regex '.*/checkpoint-[0-9]+' 2>/dev/null; }
for _ in $(seq 1 6000); do
  [[ -n $(find "$dir/killed/runs" -mindepth 3 -maxdepth 3 -type d -regex '.*/checkpoint-[0-9]+' 2>/dev/null) ]] && break
  sleep 0.005
done
kill -KILL "$pid"
{ wait "$pid"; } 2>/dev/null || true  # the braces keep bash's "Killed" notice quiet
interrupted=""
for run in "$dir"/killed/runs/*/seed-*; do
  if [[ ! -e $run/results.json && -n $(checkpoints "$run") ]]; then interrupted=$run; fi
done
[[ -n $interrupted ]] || die "no run was midway when the study was killed (log: $(cat "$dir/killed.log"))"
[[ ! -e $dir/killed/study.json ]] || die "the killed study wrote its table"
sleep 0.2
if pgrep -f -- "$dir/killed/" >/dev/null; then die "a child of the killed study is still running"; fi

"$saobp" study "$study" --out "$dir/killed" --jobs 1 >"$dir/resumed.log" 2>&1 || die "$(cat "$dir/resumed.log")"
grep -q "resumed from checkpoint-" "$dir/resumed.log" || die "no run resumed: $(cat "$dir/resumed.log")"
for f in study.json study.csv study.md; do
  cmp "$dir/whole/$f" "$dir/killed/$f" || die "$f differs between the whole and the resumed study"
done

"$saobp" study "$study" --out "$dir/killed" --jobs 2 >"$dir/again.log" 2>&1 || die "$(cat "$dir/again.log")"
[[ $(grep -c "finished earlier" "$dir/again.log") == 4 ]] || die "a finished run was redone: $(cat "$dir/again.log")"
cmp "$dir/whole/study.json" "$dir/killed/study.json" || die "study.json changed on a call with nothing to do"
# The study file edited (another learning rate), run into the same folder: its finished runs were
# trained with the old config, so the study refuses them, naming the folder and the key, and
# leaves the folder as it was (no table of the old runs under the new config).
sed 's/"train.lr=3e-3"/"train.lr=3e-1"/' "$study" >"$dir/edited.toml"
if "$saobp" study "$dir/edited.toml" --out "$dir/killed" >"$dir/edited.log" 2>&1; then
  die "an edited study reused the old runs: $(cat "$dir/edited.log")"
fi
grep -q "runs/model.attention=original/seed-1 holds a run trained with another config.*train.lr = 0.003 there, 0.3 in the study" \
  "$dir/edited.log" || die "the edited study's refusal: $(cat "$dir/edited.log")"
grep -q '^lr = 0.003' "$dir/killed/configs/model.attention=original/seed-1.toml" ||
  die "the refused study rewrote the configs"
cmp "$dir/whole/study.json" "$dir/killed/study.json" || die "the refused study rewrote study.json"
# Fine-tuning: every line of the fixtures a document, so the held-out fraction has documents.
fixtures=$root/tests/fixtures
find "$fixtures/glue/SST-2" "$fixtures/glue/STS-B" "$fixtures/glue/RTE" -type f -print0 | LC_ALL=C sort -z |
  xargs -0 cat | awk 'NF { print; print "" }' >"$dir/corpus.txt"
cat >"$dir/finetune.toml" <<TOML
[study]
base = "$root/configs/quickstart.toml"
seeds = [1, 2]
overrides = ["model.attention=original", "data.kind=text", "data.path=$dir/corpus.txt", "data.valid_fraction=0.2",
  "model.vocab_size=400", "data.vocab_size=400", "model.max_positions=64", "train.seq_len=32", "train.batch_size=8",
  "train.max_steps=4", "train.warmup_steps=1", "train.eval_every=4", "train.eval_batches=1", "train.log_every=0",
  "train.threads=1", "train.save_every=0"]
[[finetune]]
task = "glue/sst2"
data = "$fixtures/glue"
overrides = ["train.epochs=1", "train.batch_size=2", "train.seq_len=48", "train.threads=1", "train.log_every=0"]
TOML
"$saobp" study "$dir/finetune.toml" --out "$dir/ft" --jobs 2 >"$dir/ft.log" 2>&1 || die "$(cat "$dir/ft.log")"
/usr/bin/python3 - "$dir/ft/study.json" <<'PY' || die "the fine-tuning study's table: $(cat "$dir/ft/study.md")"
import json, sys
t = json.load(open(sys.argv[1]))
cells = {c["cell"]: c for c in t["cells"]}
ft = cells["base,task=glue/sst2"]
assert ft["task"] == "glue/sst2" and ft["from"] == ["base/seed-1", "base/seed-2"], ft
acc = [m for m in ft["metrics"] if m["metric"] == "dev.accuracy"]
assert acc and acc[0]["n"] == 2, ft["metrics"]
PY
"$saobp" correlate "$dir/ft" --x entropy_L1 --y loss >"$dir/corr.log" 2>&1 || die "$(cat "$dir/corr.log")"
grep -q "over runs (2 points, 0 left out)" "$dir/corr.log" || die "correlate: $(cat "$dir/corr.log")"
"$saobp" correlate "$dir/ft" --x entropy_L1 --y glue/sst2:dev.accuracy >"$dir/corr.log" 2>&1 ||
  die "$(cat "$dir/corr.log")"
grep -q "over runs (2 points, 0 left out)" "$dir/corr.log" || die "correlate: $(cat "$dir/corr.log")"
# Called again, the fine-tuning study redoes nothing; with a task override edited, it refuses the
# fine-tuning runs trained with the old one.
"$saobp" study "$dir/finetune.toml" --out "$dir/ft" >"$dir/ft2.log" 2>&1 || die "$(cat "$dir/ft2.log")"
[[ $(grep -c "finished earlier" "$dir/ft2.log") == 4 ]] || die "a finished run was redone: $(cat "$dir/ft2.log")"
sed 's/"train.epochs=1"/"train.epochs=2"/' "$dir/finetune.toml" >"$dir/ft-edited.toml"
if "$saobp" study "$dir/ft-edited.toml" --out "$dir/ft" >"$dir/ft3.log" 2>&1; then
  die "an edited fine-tuning study reused the old runs: $(cat "$dir/ft3.log")"
fi
grep -q "runs/base,task=glue_sst2/seed-1 holds a run trained with another config.*train.epochs = 1 there, 2 in the study" \
  "$dir/ft3.log" || die "the edited fine-tuning study's refusal: $(cat "$dir/ft3.log")"
echo "study: killed midway ($interrupted), resumed to the same table; nothing redone once finished; fine-tuning cells and their correlations"
