#!/usr/bin/env bash
# Seeds for the harnesses made from the test fixtures (tests/fixtures/, configs/), in each
# harness's input layout (a selector byte, then '\0'-separated parts: see the harness's header
# comment). Usage: fuzz/seeds.sh OUT  (writes OUT/<harness>/*; tools/fuzz.sh calls it). The
# hand-made seeds and the regression inputs of fixed findings are checked in under fuzz/corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$1
fx=tests/fixtures
rm -rf "$out"
mkdir -p "$out"/{config,corpus,glue,squad,race,hellaswag,boolq,imdb,sentence_tsv,wikitext}

# seed HARNESS NAME SELECTOR FILE... : the selector byte (decimal), then the files joined by '\0'.
seed() {
  local h=$1 name=$2 sel=$3 first=1
  shift 3
  {
    printf "\\x$(printf %02x "$sel")"
    for f in "$@"; do
      ((first)) || printf '\0'
      first=0
      cat "$f"
    done
  } >"$out/$h/$name"
}

for f in configs/*.toml configs/finetune/*.toml; do
  n=$(basename "$f" .toml)
  { cat "$f"; printf '\0train.max_steps=10\ndata.kind=text\n'; } >"$out/config/$n"
done

folders=(CoLA SST-2 MRPC QQP STS-B MNLI QNLI RTE WNLI)  # in glue_tasks() order
for t in "${!folders[@]}"; do
  for s in 0 1 2; do
    split=(train dev test)
    f=$fx/glue/${folders[t]}/${split[s]}.tsv
    [[ ${folders[t]} == MNLI && $s -gt 0 ]] && f=$fx/glue/MNLI/${split[s]}_matched.tsv
    seed glue "${folders[t]}_${split[s]}" $((2 * (t + 9 * s))) "$f"
  done
done

for f in "$fx"/squad/*.json; do seed squad "$(basename "$f" .json)" 0 "$f"; done
seed race middle 0 "$fx"/race/RACE/train/middle/{1,2}.txt
seed race all 4 "$fx"/race/RACE/train/middle/1.txt "$fx"/race/RACE/train/high/5.txt
for f in "$fx"/hellaswag/*.jsonl; do seed hellaswag "$(basename "$f" .jsonl)" 0 "$f"; done
seed boolq train 0 "$fx"/boolq/train.jsonl
seed boolq test 4 "$fx"/boolq/test.jsonl
seed sentence_tsv train 0 "$fx"/sentence_tsv/train.tsv "$fx"/sentence_tsv/labels.txt
seed wikitext tokens 0 "$fx"/wikitext/wikitext-2/wiki.test.tokens
seed wikitext raw 1 "$fx"/wikitext/wikitext-2-raw/wiki.test.raw
seed corpus wikitext 2 "$fx"/wikitext/wikitext-2-raw/wiki.test.raw
seed corpus jsonl 3 "$fx"/boolq/train.jsonl

# IMDb: "NAME\nTEXT" records, neg and pos alternating.
imdb=$fx/imdb/aclImdb/train
{
  printf '\0'
  for pair in "neg/0_3.txt pos/0_9.txt" "neg/2_1.txt pos/1_7.txt"; do
    for r in $pair; do
      printf '%s\n' "$(basename "$r")"
      cat "$imdb/$r"
      printf '\0'
    done
  done
} >"$out/imdb/train"
