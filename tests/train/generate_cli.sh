#!/usr/bin/env bash
# `saobp generate` and the RoPE analyses as a user runs them, on a small GPT-2 (BP-High, RoPE)
# trained here on a generated text corpus with its own BPE vocabulary:
# - greedy generation is repeatable, and every position's logits (--logits) equal those of
#   `saobp inspect` on the whole generated sequence to 1e-5, each greedy token their argmax;
# - inspect exports q and k before and after RoPE; analyze reports the frequency bands, the
#   decay bound and the positional scores; report draws them;
# - sampling with a seed is repeatable and another seed draws another text; a prompts file gives
#   one generation per line (--out: JSON lines);
# - an encoder's checkpoint, contradictory options, an empty prompts file, a prompt that is not
#   UTF-8 (the file and line named) and ids outside the vocabulary are refused with a named error;
# - nothing is written into the checkpoint.
# Usage: generate_cli.sh PATH/TO/saobp. About 10 s.
set -euo pipefail
saobp=$(realpath "$1")
work=$(mktemp -d "${TMPDIR:-/tmp}/saobp-generate.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Plain Python (no numpy): the tensors of a safetensors file as flat lists with their shapes.
cat >"$work/st.py" <<'EOF'
import array, json, struct
def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header, data = json.loads(f.read(n)), f.read()
    codes = {"F64": "d", "F32": "f", "I32": "i"}
    out = {}
    for name, info in header.items():
        if name != "__metadata__" and info["dtype"] in codes:
            a, b = info["data_offsets"]
            out[name] = (array.array(codes[info["dtype"]], data[a:b]).tolist(), info["shape"])
    return out
EOF
python3 - >"$work/corpus.txt" <<'EOF'
import random
r = random.Random(42)
who = ["the cat", "a dog", "the old man", "my friend", "the bird"]
did = ["sat on", "looked at", "ran to", "sang about", "forgot"]
what = ["the mat", "a tree", "the river", "the moon", "a song"]
for i in range(600):  # documents of 5 sentences, a blank line between them
    print(f"{r.choice(who)} {r.choice(did)} {r.choice(what)}.")
    if i % 5 == 4:
        print()
EOF
run() { "$saobp" "$@" >"$work/last.log" 2>&1 || { cat "$work/last.log" >&2; exit 1; }; }
run train "" model.family=gpt2 model.preset=custom model.hidden=32 model.intermediate=64 model.layers=2 \
  model.heads=2 model.vocab_size=300 model.max_positions=48 model.attention=bp_high model.lambda=0.5 \
  model.positions=rope data.kind=text data.path="$work/corpus.txt" data.vocab_size=300 data.valid_fraction=0.1 train.batch_size=8 \
  train.seq_len=32 train.max_steps=40 train.warmup_steps=4 train.lr=3e-3 train.eval_every=0 train.save_every=0 \
  train.threads=1 train.run_dir="$work/run" --quiet
ckpt=$work/run/final
listing() { (cd "$work/run" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
before=$(listing)
mkdir "$work/wd" && cd "$work/wd"

# Greedy, twice; the logits against inspect's.
run generate --checkpoint "$ckpt" --prompt "the cat" --greedy --max-new-tokens 16 --out g1.jsonl --logits g1.st
grep -q "tokens/s" "$work/last.log" || { echo "generate printed no tokens/s" >&2; exit 1; }
run generate --checkpoint "$ckpt" --prompt "the cat" --greedy --max-new-tokens 16 --out g2.jsonl
fed=$(python3 -c "
import sys; sys.path.insert(0, '$work')
import st
print(','.join(str(i) for i in st.read('g1.st')['prompt.0.ids'][0]))")
run inspect --checkpoint "$ckpt" --ids "$fed" --out insp.st
python3 - "$work" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[1])
import st
g1 = [json.loads(l) for l in open("g1.jsonl")]
g2 = [json.loads(l) for l in open("g2.jsonl")]
assert len(g1) == 1 and g1[0]["ids"] == g2[0]["ids"], "greedy generation is not repeatable"
assert g1[0]["stop"] in ("eos", "max_new_tokens", "max_positions"), g1[0]["stop"]
gen, gshape = st.read("g1.st")["prompt.0.logits"]
full, fshape = st.read("insp.st")["logits"]
assert gshape == fshape, (gshape, fshape)
diff = max(abs(a - b) for a, b in zip(gen, full))
assert diff < 1e-5, f"generate's logits differ from inspect's by {diff}"
P, V = len(g1[0]["prompt_ids"]), gshape[-1]
for i, tok in enumerate(g1[0]["ids"]):
    row = gen[(P - 1 + i) * V:(P + i) * V]
    assert tok == row.index(max(row)), f"greedy token {i} is not the argmax"
print(f"greedy: {len(g1[0]['ids'])} tokens, logits within {diff:.2e} of inspect's")
EOF

# The RoPE analyses on the same model: inspect exports q and k before and after the rotation
# (equal pair norms), analyze reports the frequency bands, the decay bound and positional heads.
python3 - "$work" <<'EOF'
import math, sys
sys.path.insert(0, sys.argv[1])
import st
t = st.read("insp.st")
for name in ("layer.0.q", "layer.0.k", "layer.0.q_raw", "layer.1.k_raw"):
    assert name in t, f"inspect wrote no {name}"
q, shape = t["layer.0.q"]
raw, _ = t["layer.0.q_raw"]
assert shape[0] == 2 and shape[2] == 16, shape  # (NH, T, HS)
norm = lambda v, i: math.hypot(v[i], v[i + 1])
assert max(abs(norm(q, i) - norm(raw, i)) for i in range(0, len(q), 2)) < 1e-5, "RoPE changed a pair's norm"
assert max(abs(a - b) for a, b in zip(q, raw)) > 1e-3, "q before and after RoPE are the same"
EOF
run analyze --checkpoint "$ckpt" --samples 8 --no-graph --out analysis
grep -q "positional heads" "$work/last.log" && grep -q "RoPE base 10000" "$work/last.log" || {
  echo "analyze printed no positional heads or RoPE lines" >&2
  cat "$work/last.log" >&2
  exit 1
}
python3 - <<'EOF'
import json
a = json.load(open("analysis/analysis.json"))
r = a["rope"]
assert r["base"] == 10000 and r["head_size"] == 16 and len(r["theta"]) == 8, r
assert len(r["q_norm"]) == 2 and len(r["q_norm"][0]) == 2 and len(r["q_norm"][0][0]) == 8
assert r["decay"]["distance"][0] == 0 and r["decay"]["distance"][-1] == 47
assert abs(r["decay"]["bound"][0] - 4.5) < 1e-12  # (HS/2 + 1) / 2
assert all(0 <= s <= 1 for s in r["slow_share"])
h = a["probs"]["heads"][0][0]
assert 0 <= h["diagonal"] <= 1 and 0 <= h["previous"] <= 1, h
lines = open("analysis/rope_bands.csv").read().splitlines()
assert lines[0] == "layer,head,pair,theta,wavelength,q_norm,k_norm" and len(lines) == 1 + 2 * 2 * 8
print("RoPE analyses: bands, decay, positional scores")
EOF

run report "$work/run" --samples 8 --out report.html
for id in fig-rope-decay fig-rope-bands fig-positional; do
  grep -q "id=\"$id\"" report.html || { echo "report drew no $id" >&2; exit 1; }
done

# Sampling: the seed decides; a prompts file gives one line per prompt.
printf 'the dog\n\na bird sang\n' >prompts.txt
run generate --checkpoint "$ckpt" --prompts prompts.txt --temperature 1.3 --top-k 50 --top-p 0.95 --seed 7 --out s1.jsonl
run generate --checkpoint "$ckpt" --prompts prompts.txt --temperature 1.3 --top-k 50 --top-p 0.95 --seed 7 --out s2.jsonl
run generate --checkpoint "$ckpt" --prompts prompts.txt --temperature 1.3 --top-k 50 --top-p 0.95 --seed 8 --out s3.jsonl
python3 - <<'EOF'
import json
s1, s2, s3 = ([json.loads(l) for l in open(f)] for f in ("s1.jsonl", "s2.jsonl", "s3.jsonl"))
assert len(s1) == 3, f"3 prompts gave {len(s1)} lines"
assert [r["ids"] for r in s1] == [r["ids"] for r in s2], "sampling with one seed is not repeatable"
assert [r["ids"] for r in s1] != [r["ids"] for r in s3], "seeds 7 and 8 drew the same texts"
assert s1[1]["prompt"] == "" and len(s1[1]["prompt_ids"]) == 1, "the empty prompt starts from end-of-text"
print("sampling: repeatable per seed, 3 prompts")
EOF

# Refusals: each exits non-zero with a message naming what is wrong.
refused() {  # refused PATTERN ARGS...: the command fails and its output matches PATTERN
  local pattern=$1 && shift
  if "$saobp" "$@" >"$work/last.log" 2>&1; then
    echo "accepted: saobp $*" >&2
    exit 1
  fi
  grep -q -- "$pattern" "$work/last.log" || {
    echo "saobp $*: expected '$pattern' in:" >&2
    cat "$work/last.log" >&2
    exit 1
  }
}
"$saobp" train "" model.family=bert model.preset=custom model.hidden=16 model.intermediate=32 model.layers=1 \
  model.heads=2 model.vocab_size=64 model.max_positions=16 data.kind=synthetic train.batch_size=2 \
  train.seq_len=8 train.max_steps=2 train.warmup_steps=1 train.eval_every=0 train.save_every=0 \
  train.run_dir="$work/bert" --quiet >/dev/null 2>&1
refused "causal decoder" generate --checkpoint "$work/bert/final" --ids 2,3
refused "temperature" generate --checkpoint "$ckpt" --prompt x --greedy --temperature 0.5
: >empty.txt
refused "empty.txt: no prompt" generate --checkpoint "$ckpt" --prompts empty.txt
printf 'ok\na\xffb\n' >badutf.txt
refused "badutf.txt:2: invalid UTF-8 at byte 1 of the line (--prompts)" generate --checkpoint "$ckpt" --prompts badutf.txt
refused "^saobp: error: \[generate\] --prompt: invalid UTF-8 at byte 1" generate --checkpoint "$ckpt" --prompt "$(printf 'a\xffb')"
refused "outside the model's vocabulary" generate --checkpoint "$ckpt" --ids 1,300
refused "exactly one of" generate --checkpoint "$ckpt" --prompt x --ids 1
# --device: where the reading commands run, instead of the checkpoint's train.device.
run eval --checkpoint "$ckpt" --device cpu
run inspect --checkpoint "$ckpt" --ids 1,2 --device cpu --out dev.st
for cmd in eval analyze inspect generate; do
  extra=()
  [[ $cmd == inspect || $cmd == generate ]] && extra=(--ids 1,2)
  refused "train.device" $cmd --checkpoint "$ckpt" "${extra[@]}" --device tpu
done
after=$(listing)
[[ $before == "$after" ]] || { echo "generate changed the checkpoint's folder" >&2; exit 1; }
echo "generate: refusals named; the checkpoint is unchanged"
