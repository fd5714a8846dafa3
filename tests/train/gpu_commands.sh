#!/usr/bin/env bash
# Every command of saobp on a GPU, as a user runs them (issue "Train on the GPU", item 1), each
# beside the same command on the CPU where the two must agree:
# - train: a small GPT-2 (BP-High, RoPE) and BERT trained on each device: the logged losses
#   agree to 1e-4 (relative) at every logged step;
# - eval (held-out loss), eval --task wikitext (perplexity), eval --task race/middle --zero-shot
#   (accuracy) of the GPU's checkpoint with --device cuda and --device cpu: the same figures;
# - inspect --device: the logits agree to 1e-4; generate --greedy --device: the same tokens;
# - analyze --device: the per-sample entropies and GTD agree to 1e-4;
# - finetune glue/sst2 on the GPU, then eval --task on the GPU: the fine-tune's own metrics;
# - bench --finetune, bench --inference, smoke --device cuda and a study of two GPU runs finish.
# Usage: gpu_commands.sh PATH/TO/saobp [DEVICE]  (DEVICE: default cuda; cpu tries the script on a
# machine without a GPU). Exits 77, which CTest reports as skipped, where DEVICE is a GPU and
# `saobp info` lists none. About a minute on an H200.
set -euo pipefail
saobp=$(realpath "$1")
dev=${2:-cuda}
root=$(cd "$(dirname "$0")/../.." && pwd)
fixtures=$root/tests/fixtures
if [[ $dev != cpu ]] && ! "$saobp" info | grep -q '^  GPU 0'; then
  echo "gpu_commands: no GPU: skipped"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/saobp-gpu-commands.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
run() { "$saobp" "$@" >"$work/last.log" 2>&1 || { cat "$work/last.log" >&2; exit 1; }; }
say() { echo "gpu_commands: $*"; }
# Each command runs twice: on the CPU (its outputs named "ref") and on the device ("dev").
declare -A on=([ref]=cpu [dev]=$dev)

python3 - >corpus.txt <<'EOF'
import random
r = random.Random(42)
who = ["the cat", "a dog", "the old man", "my friend", "the bird"]
did = ["sat on", "looked at", "ran to", "sang about", "forgot"]
what = ["the mat", "a tree", "the river", "the moon", "a song"]
for i in range(600):
    print(f"{r.choice(who)} {r.choice(did)} {r.choice(what)}.")
    if i % 5 == 4:
        print()
EOF
# The tensors of a safetensors file as flat lists (plain Python, no numpy).
cat >st.py <<'EOF'
import array, json, struct
def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header, data = json.loads(f.read(n)), f.read()
    out = {}
    for name, info in header.items():
        if name != "__metadata__" and info["dtype"] in ("F32", "F64", "I32"):
            a, b = info["data_offsets"]
            out[name] = array.array({"F32": "f", "F64": "d", "I32": "i"}[info["dtype"]], data[a:b]).tolist()
    return out
EOF
# close A B WHAT: every number of the JSON values or files A and B within 1e-4 (relative, 1e-6
# absolute), keys ending in per_s and seconds left out (timings).
close() {
  python3 - "$@" <<'EOF'
import json, math, sys
a, b, what = sys.argv[1:4]
def load(x):
    try:
        return json.load(open(x))
    except (OSError, ValueError):
        return json.loads(x)
def walk(x, y, path):
    if isinstance(x, dict):
        assert set(x) == set(y), f"{what}: keys differ at {path}"
        for k in x:
            if not (k.endswith("per_s") or "seconds" in k or k.endswith("_ms")):
                walk(x[k], y[k], f"{path}.{k}")
    elif isinstance(x, list):
        assert len(x) == len(y), f"{what}: lengths differ at {path}"
        for i, (u, v) in enumerate(zip(x, y)):
            walk(u, v, f"{path}[{i}]")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        assert math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-6), f"{what}: {path}: {x} against {y}"
    else:
        assert x == y, f"{what}: {path}: {x!r} against {y!r}"
walk(load(a), load(b), "")
EOF
}

common=(model.preset=custom model.hidden=32 model.intermediate=64 model.layers=2 model.heads=2 model.vocab_size=300
  model.max_positions=128 model.attention=bp_high data.kind=text data.path="$work/corpus.txt" data.vocab_size=300
  data.valid_fraction=0.1 train.batch_size=8 train.seq_len=32 train.max_steps=40 train.warmup_steps=4 train.lr=3e-3
  train.eval_every=0 train.save_every=0 train.log_every=10 train.threads=1)
losses() { python3 -c "import json,sys; print(json.dumps([json.loads(l)['loss'] for l in open(sys.argv[1]) if '\"loss\"' in l and 'step' in l]))" "$1"; }
for family in gpt2 bert; do
  extra=()
  [[ $family == gpt2 ]] && extra=(model.positions=rope model.lambda=0.5)
  for s in ref dev; do
  d=${on[$s]}
    run train "" model.family=$family "${common[@]}" "${extra[@]}" train.device=$d train.run_dir="$work/$family-$s" --quiet
  done
  close "$(losses "$work/$family-ref/metrics.jsonl")" "$(losses "$work/$family-dev/metrics.jsonl")" "$family train losses"
  say "train $family on $dev: the CPU's losses at every logged step"
done
ckpt=$work/gpt2-dev/final

# eval: held-out loss, WikiText perplexity, RACE zero-shot.
for s in ref dev; do
  d=${on[$s]}
  run eval --checkpoint "$ckpt" --device $d
  grep -o 'loss [0-9.]* | accuracy [0-9.]* | perplexity [0-9.]*' last.log >"eval-$s.txt"
  run eval --checkpoint "$ckpt" --task wikitext --data "$fixtures/wikitext/wikitext-2-raw" --out "wt-$s.json" \
    --device $d train.seq_len=16
  run eval --checkpoint "$ckpt" --task race/middle --zero-shot --data "$fixtures/race/RACE" --out "race-$s.json" \
    --device $d
done
[[ -s eval-ref.txt ]] && cmp -s eval-ref.txt eval-dev.txt || {
  echo "eval: $(cat eval-ref.txt) on the CPU, $(cat eval-dev.txt) on $dev" >&2
  exit 1
}
py_metrics() { python3 -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['metrics']))" "$1"; }
close "$(py_metrics wt-ref.json)" "$(py_metrics wt-dev.json)" "eval --task wikitext"
close "$(py_metrics race-ref.json)" "$(py_metrics race-dev.json)" "eval --task race/middle --zero-shot"
say "eval, eval --task wikitext, eval --zero-shot race/middle on $dev: the CPU's figures"

# inspect and generate.
for s in ref dev; do
  d=${on[$s]}
  run inspect --checkpoint "$ckpt" --ids 5,9,17,33,2,8 --out "insp-$s.st" --device $d
  run generate --checkpoint "$ckpt" --prompt "the cat" --greedy --max-new-tokens 12 --out "gen-$s.jsonl" --device $d
done
python3 - "$dev" <<'EOF'
import json, sys
import st
a, b = st.read("insp-ref.st")["logits"], st.read("insp-dev.st")["logits"]
d = max(abs(x - y) / max(1.0, abs(x)) for x, y in zip(a, b))
assert len(a) == len(b) and d < 1e-4, f"inspect's logits differ by {d}"
g = [json.loads(open(f).readline())["ids"] for f in ("gen-ref.jsonl", "gen-dev.jsonl")]
assert g[0] == g[1] and len(g[0]) > 0, f"greedy generation differs: {g}"
print(f"gpu_commands: inspect (logits within {d:.1e}) and generate --greedy ({len(g[0])} tokens) on the device: the CPU's")
EOF

# analyze.
for s in ref dev; do
  d=${on[$s]}
  run analyze --checkpoint "$ckpt" --samples 4 --per-sample --no-graph --out "an-$s" --device $d
done
python3 - "$dev" <<'EOF'
import csv, math, sys
rows = [list(csv.DictReader(open(f"an-{d}/per_sample.csv"))) for d in ("ref", "dev")]
assert len(rows[0]) == len(rows[1]) > 0
n = 0
for r, s in zip(*rows):
    for k, v in r.items():
        try:
            x, y = float(v), float(s[k])
        except ValueError:
            assert v == s[k], (k, v, s[k])
            continue
        if math.isnan(x) and math.isnan(y):  # a figure not computed (--no-graph)
            continue
        assert math.isclose(x, y, rel_tol=1e-4, abs_tol=1e-5), f"analyze {k}: {x} against {y}"
        n += 1
print(f"gpu_commands: analyze on the device: {n} per-sample figures within 1e-4 of the CPU's")
EOF

# finetune on the GPU, then eval --task of its checkpoint on the GPU.
run train "" model.family=bert "${common[@]}" data.path="$work/corpus.txt" train.device=$dev \
  train.run_dir="$work/bert-ft-pre" --quiet
run finetune --init "$work/bert-ft-pre/final" --task glue/sst2 --data "$fixtures/glue" train.epochs=2 \
  train.batch_size=2 train.seq_len=32 train.log_every=0 train.device=$dev train.run_dir="$work/sst2" --quiet
run eval --checkpoint "$work/sst2/final" --task glue/sst2 --data "$fixtures/glue" --out sst2-eval.json --device $dev
close "$(py_metrics "$work/sst2/results.json")" "$(py_metrics sst2-eval.json)" "finetune against eval --task"
say "finetune glue/sst2 and eval --task on $dev: the same metrics"

# bench --finetune and --inference, smoke, a study: they finish on the device.
small=(model.preset=custom model.hidden=64 model.intermediate=128 model.layers=2 model.heads=2 model.vocab_size=512
  data.vocab_size=512 model.max_positions=64 train.seq_len=64 train.batch_size=8 data.kind=synthetic train.device=$dev)
run bench "$root/configs/bert-mini.toml" "${small[@]}" --finetune glue/sst2 --warmup 2 --steps 20
grep -q 'tokens/s' last.log
run bench "$root/configs/gpt2-mini.toml" "${small[@]}" --inference --warmup 2 --steps 20
grep -q 'tokens/s' last.log
run smoke --device $dev --steps 150
grep -q "on $dev" last.log
for s in ref dev; do
  sed -e "s/^name = \"tiny\"/name = \"tiny-$s\"/" \
    -e "s/\"train.threads=1\",/\"train.threads=1\", \"train.device=${on[$s]}\",/" "$root/configs/studies/tiny.toml" >study-$s.toml
  grep -q "train.device=${on[$s]}" study-$s.toml
  run study study-$s.toml --out "$work/study-$s" --jobs 1 --quiet
done
python3 - <<'EOF'
import json, math
s = [json.load(open(f"study-{x}/study.json")) for x in ("ref", "dev")]
n = 0
for a, b in zip(s[0]["cells"], s[1]["cells"]):
    assert a["cell"] == b["cell"]
    for m, k in zip(a["metrics"], b["metrics"]):
        assert m["metric"] == k["metric"] and m["n"] == k["n"] == 2
        if m["metric"] == "loss":  # 200 steps: the parity bound of a step, grown a little
            assert math.isclose(m["mean"], k["mean"], rel_tol=1e-3), (a["cell"], m, k)
            n += 1
assert n == len(s[0]["cells"]) == 2
print("gpu_commands: bench --finetune, bench --inference, smoke and a study (2 x 2 runs) on the device; "
      "the study's mean losses within 1e-3 of the CPU's")
EOF
say "every command on $dev: passed"
