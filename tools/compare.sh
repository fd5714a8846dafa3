#!/usr/bin/env bash
# saobp vs PyTorch on one run config, in one go:
#   tools/compare.sh CONFIG [section.key=value ...]
#   FINETUNE=glue/sst2 tools/compare.sh CONFIG [section.key=value ...]
# runs `saobp bench` and tools/bench_pytorch.py (HF MLM head on every position, and --gather:
# head only at the masked positions, as saobp computes it) on the same resolved config and
# prints saobp's tokens/s as a ratio of each PyTorch figure, for ROUNDS alternating rounds and
# their median. Environment: SAOBP (the binary, default build/saobp), BENCH_ARGS (extra
# arguments for both, e.g. "--steps 30 --warmup 3"), ROUNDS (default 3), HF_HEAD=0 (BERT: skip
# the slow all-positions head and time only the like-for-like --gather baseline), FINETUNE (a
# task, glue/sst2: the fine-tuning step instead, below).
#
# FINETUNE=glue/sst2: `saobp bench --finetune glue/sst2` (saobp finetune's BERT
# sequence-classification step on rows of exactly T tokens, with saobp's own masked-LM step of
# the same config timed in the same run) against `bench_pytorch.py --finetune glue/sst2` (HF's
# BertForSequenceClassification in plain torch); per round and as medians it prints saobp/PyTorch
# of the fine-tuning step and saobp's fine-tuning/pretraining tokens/s.
#
# PyTorch comes from Debian (python3-torch 1.13, run by /usr/bin/python3, not a pyenv python).
# Debian's torch is built against the generic libblas.so.3 (BLAS_INFO=generic), which the
# alternatives system points at the reference BLAS (libblas3) unless an optimized BLAS is
# installed; timing torch on the reference BLAS would be meaningless. This script therefore
# installs libopenblas0-pthread, which registers its libblas.so.3 at a higher priority than
# the reference one, and if the alternative is in manual mode pointing elsewhere it says so and
# stops (switch it with: update-alternatives --set libblas.so.3-x86_64-linux-gnu
# /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3). bench_pytorch.py checks again which
# BLAS library is actually mapped into its process and refuses to time anything else.
# Each bench prints (and the summary repeats) the share of the machine's CPU time the hypervisor
# stole ("steal") and the one other processes used ("others") during its timed steps: a round
# with either above a few percent was timed on a busy machine.
# OpenBLAS's own thread pool is sized to train.threads (OPENBLAS_NUM_THREADS) so torch's OpenMP
# threads and OpenBLAS's do not oversubscribe the cores.
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 1)); then
  echo "usage: tools/compare.sh CONFIG [section.key=value ...]" >&2
  exit 2
fi
SAOBP=${SAOBP:-build/saobp}
PY=/usr/bin/python3
read -r -a EXTRA <<<"${BENCH_ARGS:-}"
ROUNDS=${ROUNDS:-3}
HF_HEAD=${HF_HEAD:-1}
FINETUNE=${FINETUNE:-}

# python3-torch and OpenBLAS through the project's installer (apt only when one is missing).
bash tools/deps.sh python3-torch libopenblas0-pthread
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)
echo "compare: libblas.so.3 -> $blas"
case "$blas" in
  *openblas*) ;;
  *)
    echo "compare: libblas.so.3 is not OpenBLAS; run" >&2
    echo "  update-alternatives --set libblas.so.3-x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3" >&2
    exit 1
    ;;
esac
if [[ ! -x $SAOBP ]]; then
  echo "compare: $SAOBP not found; build it first (cmake -S . -B build && ninja -C build saobp)" >&2
  exit 1
fi

threads=$("$SAOBP" bench "$@" --print-config | awk -F' = ' '/^threads/ {print $2}')
if [[ -z $threads || $threads == 0 ]]; then threads=$(nproc); fi
export OPENBLAS_NUM_THREADS=$threads

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
family=$("$SAOBP" bench "$@" --print-config | awk -F' = ' '/^family/ {gsub(/"/, "", $2); print $2}')
# Rounds: saobp and PyTorch alternate, so a slow spell of the (shared, virtual) machine hits
# both sides of a round's ratio; the summary gives each round's ratio and their median.
for ((r = 1; r <= ROUNDS; ++r)); do
  echo "== round $r of $ROUNDS, load before: $(uptime)"
  if [[ -n $FINETUNE ]]; then
    echo "== saobp, fine-tuning $FINETUNE (and its pretraining step)"
    "$SAOBP" bench "$@" "${EXTRA[@]}" --finetune "$FINETUNE" --json "$tmp/saobp.$r.json"
    echo "== PyTorch, fine-tuning $FINETUNE"
    $PY tools/bench_pytorch.py "$@" "${EXTRA[@]}" --saobp "$SAOBP" --finetune "$FINETUNE" \
      --json "$tmp/torch_finetune.$r.json"
    continue
  fi
  echo "== saobp"
  "$SAOBP" bench "$@" "${EXTRA[@]}" --json "$tmp/saobp.$r.json"
  if [[ $family == bert && $HF_HEAD == 1 ]]; then
    echo "== PyTorch, HF MLM head (all positions)"
    $PY tools/bench_pytorch.py "$@" "${EXTRA[@]}" --saobp "$SAOBP" --json "$tmp/torch.$r.json"
  fi
  if [[ $family == bert ]]; then
    echo "== PyTorch, --gather (head at the masked positions only, as saobp)"
    $PY tools/bench_pytorch.py "$@" "${EXTRA[@]}" --saobp "$SAOBP" --gather --json "$tmp/torch_gather.$r.json"
  else
    echo "== PyTorch"
    $PY tools/bench_pytorch.py "$@" "${EXTRA[@]}" --saobp "$SAOBP" --json "$tmp/torch.$r.json"
  fi
done
echo "== load after: $(uptime)"
$PY - "$tmp" "$ROUNDS" <<'EOF'
import json, os, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def load(name):
    p = os.path.join(d, name)
    return json.load(open(p)) if os.path.exists(p) else None
labels = (("torch", "PyTorch (HF head, all positions)"), ("torch_gather", "PyTorch (head at the masked positions)"),
          ("torch_finetune", "PyTorch (fine-tuning step)"))
ratios = {key: [] for key, _ in labels}
own = []  # saobp's fine-tuning / pretraining tokens/s (FINETUNE)
for r in range(1, rounds + 1):
    s = load(f"saobp.{r}.json")
    steal = lambda j: ((f", steal {100 * j['steal_fraction']:.0f}%" if j.get("steal_fraction", -1) >= 0 else "")
                       + (f", others {100 * j['others_fraction']:.0f}%" if j.get("others_fraction", -1) >= 0 else ""))
    if s.get("mode") == "finetune":
        p = s["pretrain"]
        own.append(s["finetune_over_pretrain"])
        print(f"round {r}: saobp {s['attention']} fine-tuning {s['task']}: {s['tokens_per_s']:.0f} tokens/s "
              f"({s['ms_per_step_median']:.1f} ms/step{steal(s)}); its pretraining step: {p['tokens_per_s']:.0f} "
              f"tokens/s ({p['ms_per_step_median']:.1f} ms/step); fine-tuning/pretraining = {own[-1]:.2f}x")
    else:
        print(f"round {r}: saobp {s['attention']}: {s['tokens_per_s']:.0f} tokens/s ({s['ms_per_step_median']:.1f} ms/step{steal(s)})")
    for key, label in labels:
        t = load(f"{key}.{r}.json")
        if t:
            ratios[key].append(s["tokens_per_s"] / t["tokens_per_s"])
            print(f"  {label}: {t['tokens_per_s']:.0f} tokens/s ({t['ms_per_step_median']:.1f} ms/step{steal(t)}); "
                  f"saobp/pytorch = {ratios[key][-1]:.2f}x")
for key, label in labels:
    if ratios[key]:
        print(f"median over {len(ratios[key])} rounds, saobp / {label}: {statistics.median(ratios[key]):.2f}x "
              f"(rounds: {', '.join(f'{x:.2f}' for x in ratios[key])})")
if own:
    print(f"median over {len(own)} rounds, saobp fine-tuning / saobp pretraining (same B, T): "
          f"{statistics.median(own):.2f}x (rounds: {', '.join(f'{x:.2f}' for x in own)})")
EOF
