#!/usr/bin/env bash
# `saobp bench --inference` end to end: on a tiny custom BERT and GPT-2 (C = 16, L = 2, B = 4,
# T = 8), every attention variant's run writes a JSON file in which each figure of both batch
# sizes (B, and 1 for the latency) is positive and finite, and `saobp cost --bench` puts each
# variant's batch ms_median, tokens/s and single ms_median into its row unchanged.
# Usage: bench_inference.sh PATH/TO/saobp. About 5 s on a busy 2-core machine.
set -euo pipefail
saobp=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/saobp-bench-inference.XXXXXX")
trap 'rm -rf "$work"' EXIT
variants=(original bp_high bp_low bp_elemmul)
for family in bert gpt2; do
  tiny=("model.family=$family" model.preset=custom model.hidden=16 model.intermediate=32 model.layers=2
    model.heads=2 model.vocab_size=64 model.max_positions=16 data.kind=synthetic train.batch_size=4
    train.seq_len=8)
  benches=()
  for v in "${variants[@]}"; do
    "$saobp" bench "" "${tiny[@]}" model.attention="$v" --inference --warmup 1 --steps 20 \
      --json "$work/$family-$v.json" >"$work/$family-$v.log" 2>&1 || {
      cat "$work/$family-$v.log" >&2
      exit 1
    }
    benches+=(--bench "$work/$family-$v.json")
  done
  "$saobp" cost "" "${tiny[@]}" "${benches[@]}" --out "$work/$family-cost.json" >"$work/$family-cost.log"
  python3 - "$work" "$family" "${variants[@]}" <<'PY'
import json, math, sys
work, family, variants = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = json.load(open(f"{work}/{family}-cost.json"))["cost_table"]["variants"]
assert [r["attention"] for r in rows] == variants, rows
for v, row in zip(variants, rows):
    j = json.load(open(f"{work}/{family}-{v}.json"))
    assert j["mode"] == "inference" and j["attention"] == v and j["family"] == family, j
    for which, B in (("batch", 4), ("single", 1)):
        f = j[which]
        assert f["batch_size"] == B and f["tokens"] == 8 * B and f["passes"] == 20, (v, which, f)
        for key in ("ms_median", "ms_min", "ms_max", "tokens_per_s", "sequences_per_s", "flops", "gflops"):
            x = f[key]
            assert isinstance(x, (int, float)) and math.isfinite(x) and x > 0, (family, v, which, key, x)
    assert row["inference_ms_per_batch"] == j["batch"]["ms_median"], (v, row)
    assert row["inference_tokens_per_s"] == j["batch"]["tokens_per_s"], (v, row)
    assert row["latency_ms"] == j["single"]["ms_median"], (v, row)
print(f"bench --inference: {family}: {', '.join(variants)}: positive, finite figures in the cost table")
PY
done
