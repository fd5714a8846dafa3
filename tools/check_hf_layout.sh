#!/usr/bin/env bash
# CTest entry: pretrains a tiny `original` BERT and GPT-2 for a few steps on a corpus made of the
# benchmark fixtures' texts (so the trained vocabularies cover them), fine-tunes them for a few
# steps on the fixtures (BERT: SST-2, STS-B, RACE, SQuAD v1.1; GPT-2: RTE), inspects one input
# with every checkpoint (the pretrained ones: --ids; the fine-tuned ones: the first dev example,
# --sample 0), and has tools/check_hf_layout.py load each checkpoint into the Hugging Face class
# its config.json names (BertForMaskedLM, GPT2LMHeadModel, BertForSequenceClassification,
# BertForMultipleChoice, BertForQuestionAnswering, GPT2ForSequenceClassification; plain torch) and
# compare the outputs. About 10 s on the 2-core machine. Exits 77 (skipped) when Debian's
# python3-torch is not installed (tools/test.sh installs it).
#   tools/check_hf_layout.sh SAOBP_BINARY
set -euo pipefail
saobp=$1
root=$(cd "$(dirname "$0")/.." && pwd)
fixtures=$root/tests/fixtures
if ! /usr/bin/python3 -c "import torch, numpy" 2>/dev/null; then
  echo "python3-torch is not installed: skipped"
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# The corpus: every line of the fixtures a document of its own (data.kind=text ends a document at
# a blank line), so that the held-out fraction has documents.
find "$fixtures/glue/SST-2" "$fixtures/glue/STS-B" "$fixtures/glue/RTE" "$fixtures/race/RACE" \
  "$fixtures/squad/dev-v1.1.json" -type f -print0 | LC_ALL=C sort -z | xargs -0 cat |
  awk 'NF { print; print "" }' >"$dir/corpus.txt"
# SQuAD v1.1 fine-tuning reads DIR/train-v1.1.json and DIR/dev-v1.1.json.
mkdir "$dir/squad"
cp "$fixtures/squad/dev-v1.1.json" "$dir/squad/train-v1.1.json"
cp "$fixtures/squad/dev-v1.1.json" "$dir/squad/dev-v1.1.json"

checks=()
for family in bert gpt2; do
  "$saobp" train "$root/configs/quickstart.toml" model.family=$family model.attention=original data.kind=text \
    "data.path=$dir/corpus.txt" data.valid_fraction=0.2 model.vocab_size=400 data.vocab_size=400 \
    model.max_positions=64 train.seq_len=32 train.batch_size=8 train.max_steps=4 train.warmup_steps=1 \
    train.eval_every=0 train.log_every=0 train.threads=1 "train.run_dir=$dir/$family" --quiet >/dev/null
  "$saobp" inspect --checkpoint "$dir/$family/final" --ids 2,7,9,11,4,13,3 --out "$dir/$family.safetensors" >/dev/null
  checks+=("$dir/$family/final" "$dir/$family.safetensors")
done

# finetune NAME FAMILY TASK DATA [OVERRIDES...]
finetune() {
  local name=$1 family=$2 task=$3 data=$4
  shift 4
  "$saobp" finetune --init "$dir/$family/final" --task "$task" --data "$data" train.epochs=1 train.batch_size=2 \
    train.seq_len=48 train.threads=1 train.log_every=0 "train.run_dir=$dir/$name" "$@" --quiet >/dev/null
  # The folder's config.toml names the data: inspect re-reads it, so it must still be there.
  "$saobp" inspect --checkpoint "$dir/$name/final" --sample 0 --out "$dir/$name.safetensors" >/dev/null
  checks+=("$dir/$name/final" "$dir/$name.safetensors")
}
finetune bert-sst2 bert glue/sst2 "$fixtures/glue"
finetune bert-stsb bert glue/stsb "$fixtures/glue"
finetune bert-race bert race/all "$fixtures/race/RACE"
finetune bert-squad bert squad/v1.1 "$dir/squad" data.max_query_length=12 data.doc_stride=16
finetune gpt2-rte gpt2 glue/rte "$fixtures/glue"

/usr/bin/python3 "$root/tools/check_hf_layout.py" "${checks[@]}"
