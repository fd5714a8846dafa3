#!/usr/bin/env bash
# CTest entry: trains a tiny `original` BERT and GPT-2 for a few steps, inspects one input with
# each, and has tools/check_hf_layout.py load the checkpoints into Hugging Face's module layout
# (in plain torch) and compare the logits. Exits 77 (skipped) when Debian's python3-torch is
# not installed (tools/test.sh installs it).
#   tools/check_hf_layout.sh SAOBP_BINARY
set -euo pipefail
saobp=$1
root=$(cd "$(dirname "$0")/.." && pwd)
if ! /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then
  echo "python3-torch is not installed: skipped"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for family in bert gpt2; do
  "$saobp" train "$root/configs/quickstart.toml" model.family=$family data.kind=synthetic model.vocab_size=128 \
    data.vocab_size=128 model.attention=original train.max_steps=12 train.warmup_steps=2 train.eval_every=0 \
    train.log_every=0 train.threads=1 "train.run_dir=$dir/$family" --quiet >/dev/null
  "$saobp" inspect --checkpoint "$dir/$family/final" --ids 2,7,9,11,4,13,3 --out "$dir/$family.safetensors" >/dev/null
  /usr/bin/python3 "$root/tools/check_hf_layout.py" "$dir/$family/final" "$dir/$family.safetensors"
done
