#!/usr/bin/env bash
# saobp vs PyTorch on one GPU, side by side in one run (issue 22 item 8):
#   tools/bench_gpu.sh TABLE.md
# For each of configs/{bert-mini,bert-medium,gpt2-mini,gpt2-medium}.toml and T in 128 512 it runs
#   saobp bench CONFIG train.device=cuda model.attention=original|bp_high train.seq_len=T data.kind=synthetic
#   python3 tools/bench_pytorch.py CONFIG train.seq_len=T data.kind=synthetic --device cuda [--compile]
# (the same resolved config: bench_pytorch.py reads it from `saobp bench ... --print-config`; the
# same B, warm-up and timed steps; f32, TF32 off; PyTorch eager with fused AdamW, and
# torch.compile of the model's loss function) and prints one markdown table (tokens/s and
# ms/step of each, saobp original / torch eager tokens/s, saobp bp_high / original step time,
# peak GPU memory of each), with the device, driver and CUDA version above it; the table also goes
# to TABLE.md. BERT's PyTorch step is HF's BertForMaskedLM (MLM head on every position; saobp
# runs its head on the masked positions only: GATHER=1 gives PyTorch that too).
#
# All eager entries run first (saobp original, saobp bp_high, torch eager for each model and T),
# then the torch.compile ones (each compiles for tens of seconds), so a run cut short still has
# the eager table. An entry that fails or runs past its time limit shows FAIL and the script goes
# on; the table is rewritten after every entry. Each entry's log and JSON are kept in
# $BENCH_DIR (default: TABLE.md's folder/bench_gpu).
#
# Environment: SAOBP (default build-cuda/saobp), PYTHON (default python3: the one with a CUDA
# torch >= 2.0), WARMUP (default 5), STEPS (timed steps, default 20, at least 20), CONFIGS
# (default "bert-mini bert-medium gpt2-mini gpt2-medium"), SEQS (default "128 512"),
# COMPILE=0 (skip the torch.compile entries), SDPA=1 (also PyTorch eager with
# F.scaled_dot_product_attention, HF's default attention: one more column), GATHER=1 (BERT:
# PyTorch's MLM head on the masked positions only), TORCH_BP=1 (also PyTorch's BP-High as plain
# tensor ops, bench_pytorch.py --attention bp_high, eager and, with COMPILE=1, compiled: the
# columns saobp bp_high is compared with), BF16=1 (every PyTorch entry under bf16 autocast,
# --bf16, and saobp with train.precision=bf16: bf16 GEMM inputs, docs/precision.md),
# ENTRY_TIMEOUT (s, default 120),
# COMPILE_TIMEOUT (s, default 240), TORCH_ARGS (more bench_pytorch.py arguments), TORCH_DEVICE
# (default cuda; cpu only to try this script on a machine without a GPU). With the defaults it is meant to take about 4 minutes on
# an H200 (16 eager entries of 25 steps, 8 compilations).
set -uo pipefail
caller=$PWD
cd "$(dirname "$0")/.." || exit 1

if (($# != 1)); then
  echo "usage: tools/bench_gpu.sh TABLE.md" >&2
  exit 2
fi
table=$1
[[ $table == /* ]] || table=$caller/$table
SAOBP=${SAOBP:-build-cuda/saobp}
PY=${PYTHON:-python3}
WARMUP=${WARMUP:-5}
STEPS=${STEPS:-20}
CONFIGS=${CONFIGS:-bert-mini bert-medium gpt2-mini gpt2-medium}
SEQS=${SEQS:-128 512}
COMPILE=${COMPILE:-1}
SDPA=${SDPA:-0}
GATHER=${GATHER:-0}
TORCH_BP=${TORCH_BP:-0}
BF16=${BF16:-0}
ENTRY_TIMEOUT=${ENTRY_TIMEOUT:-120}
COMPILE_TIMEOUT=${COMPILE_TIMEOUT:-240}
dir=${BENCH_DIR:-$(dirname "$table")/bench_gpu}
mkdir -p "$dir" "$(dirname "$table")"
rm -f "$dir"/*.json "$dir"/*.log "$dir"/*.rc
steps=(--warmup "$WARMUP" --steps "$STEPS")
read -r -a torch_extra <<<"${TORCH_ARGS:-}"
[[ $GATHER == 1 ]] && torch_extra+=(--gather)
[[ $BF16 == 1 ]] && torch_extra+=(--bf16)
saobp_extra=()
[[ $BF16 == 1 ]] && saobp_extra+=(train.precision=bf16)

if [[ ! -x $SAOBP ]]; then
  echo "bench_gpu: $SAOBP not found; build it first (tools/gpu_check.sh, or cmake -DSAOBP_CUDA=ON -B build-cuda)" >&2
  exit 1
fi
for c in $CONFIGS; do
  [[ -f configs/$c.toml ]] || {
    echo "bench_gpu: configs/$c.toml not found" >&2
    exit 1
  }
done
t_start=$SECONDS

# The machine, for the table's header.
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), host $(uname -n), $(nproc) cores"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv,noheader 2>&1 |
      sed 's/^/nvidia-smi: /'
  else
    echo "nvidia-smi: not found"
  fi
  "$PY" -c 'import torch, sys; print(f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, triton", end=" ");
try:
    import triton; print(triton.__version__)
except Exception: print("(none)")' 2>&1 | tail -1
  grep -m1 MemTotal /proc/meminfo | sed "s/^/host memory: /"
  "$SAOBP" info 2>&1 | grep -i -m 4 -E 'cuda|gpu|device' | sed 's/^/saobp info: /'
} >"$dir/machine.txt"
cat "$dir/machine.txt"

render() {
  "$PY" - "$dir" "$table" "$CONFIGS" "$SEQS" "$COMPILE" "$SDPA" "$GATHER" "$WARMUP" "$STEPS" "$TORCH_BP" "$BF16" <<'EOF'
import json, os, sys
d, table, configs, seqs, compile_, sdpa, gather, warmup, steps, torch_bp, bf16 = sys.argv[1:]
configs, seqs = configs.split(), seqs.split()

def load(name):
    p = os.path.join(d, name + ".json")
    if os.path.exists(p):
        try:
            return json.load(open(p)), "ok"
        except ValueError:
            return None, "FAIL"
    rc = os.path.join(d, name + ".rc")
    if os.path.exists(rc):
        code = open(rc).read().strip()
        return None, "FAIL (timeout)" if code in ("124", "137") else "FAIL"
    return None, "not run"

def speed(j, st):
    return f"{j['tokens_per_s']:.0f} ({j['ms_per_step_median']:.1f} ms)" if j else st

def peak(j, st):
    if not j:
        return st
    v = j.get("peak_device_memory_gib")
    return "n/a" if v is None else f"{v:.2f}"

kinds = [("saobp-original", "saobp original"), ("saobp-bp_high", "saobp bp_high"), ("torch-eager", "torch eager")]
if sdpa == "1":
    kinds.append(("torch-sdpa", "torch eager sdpa"))
if compile_ == "1":
    kinds.append(("torch-compile", "torch compile"))
if torch_bp == "1":
    kinds.append(("torch-bp_high", "torch bp_high eager"))
    if compile_ == "1":
        kinds.append(("torch-bp_high-compile", "torch bp_high compile"))
head = ["model", "T"] + [f"{label} tok/s (ms/step)" for _, label in kinds]
head += ["saobp original / torch eager tok/s", "saobp bp_high / original step time"]
if torch_bp == "1":
    head.append("saobp bp_high / torch bp_high " + ("compile" if compile_ == "1" else "eager") + " tok/s")
head += [f"peak GiB {label}" for _, label in kinds]
if compile_ == "1":
    head.append("torch compile s")
rows = []
dev = None
for c in configs:
    for T in seqs:
        got = {k: load(f"{c}-T{T}-{k}") for k, _ in kinds}
        row = [c, T] + [speed(*got[k]) for k, _ in kinds]
        so, te, sb = got["saobp-original"][0], got["torch-eager"][0], got["saobp-bp_high"][0]
        row.append(f"{so['tokens_per_s'] / te['tokens_per_s']:.2f}x" if so and te else "-")
        row.append(f"{sb['ms_per_step_median'] / so['ms_per_step_median']:.2f}x" if so and sb else "-")
        if torch_bp == "1":
            tb = got["torch-bp_high-compile" if compile_ == "1" else "torch-bp_high"][0]
            row.append(f"{sb['tokens_per_s'] / tb['tokens_per_s']:.2f}x" if sb and tb else "-")
        row += [peak(*got[k]) for k, _ in kinds]
        if compile_ == "1":
            j = got["torch-compile"][0]
            row.append(f"{j['compile_s']:.0f}" if j and j.get("compile_s") is not None else "-")
        rows.append(row)
        for k, _ in kinds:
            j = got[k][0]
            if j and j.get("device_name") and j.get("tool") == "pytorch" and not dev:
                dev = j
lines = []
with open(os.path.join(d, "machine.txt")) as f:
    lines += [f"<!-- {l.rstrip()} -->" for l in f if l.strip()]
if dev:
    lines.append(f"Device: {dev['device_name']} ({dev['device']}, compute capability {dev.get('capability')}, "
                 f"{dev.get('memory_gib', 0):.0f} GiB); driver {dev.get('driver')} (CUDA {dev.get('driver_cuda_version')}); "
                 f"torch {dev['torch']} built with CUDA {dev.get('cuda_version')}, cuDNN {dev.get('cudnn_version')}.")
lines.append(("saobp train.precision=bf16, PyTorch bf16 autocast (--bf16)" if bf16 == "1" else "f32") + f", TF32 off on both sides; {warmup} warm-up + {steps} timed steps, median step; B as in each config; "
             f"PyTorch: AdamW(fused=True), BERT MLM head on {'the masked positions (--gather)' if gather == '1' else 'every position (HF)'}; "
             f"peak = most bytes of live tensors (saobp allocator / torch.cuda.max_memory_allocated).")
lines.append("")
lines.append("| " + " | ".join(head) + " |")
lines.append("|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|")
lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
text = "\n".join(lines) + "\n"
with open(table, "w") as f:
    f.write(text)
print(text, end="")
EOF
}

# entry NAME LIMIT COMMAND...: one bench, its output in NAME.log, its exit status in NAME.rc.
entry() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" >"$dir/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$dir/$name.rc"
  if ((rc != 0)); then
    rm -f "$dir/$name.json"
    echo "bench_gpu: $name FAIL (rc $rc, $((SECONDS - t0)) s; last lines of $dir/$name.log:)"
    tail -5 "$dir/$name.log" | sed 's/^/    /'
  else
    echo "bench_gpu: $name ok ($((SECONDS - t0)) s, $((SECONDS - t_start)) s in all): $(grep -m1 '^tokens/s' "$dir/$name.log")"
  fi
}

torch_bench() {  # torch_bench NAME LIMIT CONFIG T [flags...]
  local name=$1 limit=$2 c=$3 T=$4
  shift 4
  entry "$name" "$limit" "$PY" tools/bench_pytorch.py "configs/$c.toml" "train.seq_len=$T" data.kind=synthetic \
    --device "${TORCH_DEVICE:-cuda}" --saobp "$SAOBP" "${steps[@]}" "${torch_extra[@]}" "$@" --json "$dir/$name.json"
}

for c in $CONFIGS; do
  for T in $SEQS; do
    for attention in original bp_high; do
      entry "$c-T$T-saobp-$attention" "$ENTRY_TIMEOUT" "$SAOBP" bench "configs/$c.toml" train.device=cuda \
        "model.attention=$attention" "train.seq_len=$T" data.kind=synthetic "${saobp_extra[@]}" "${steps[@]}" \
        --json "$dir/$c-T$T-saobp-$attention.json"
    done
    torch_bench "$c-T$T-torch-eager" "$ENTRY_TIMEOUT" "$c" "$T"
    [[ $TORCH_BP == 1 ]] && torch_bench "$c-T$T-torch-bp_high" "$ENTRY_TIMEOUT" "$c" "$T" --attention bp_high
    [[ $SDPA == 1 ]] && torch_bench "$c-T$T-torch-sdpa" "$ENTRY_TIMEOUT" "$c" "$T" --sdpa
    render >/dev/null
  done
done
if [[ $COMPILE == 1 ]]; then
  for c in $CONFIGS; do
    for T in $SEQS; do
      torch_bench "$c-T$T-torch-compile" "$COMPILE_TIMEOUT" "$c" "$T" --compile
      [[ $TORCH_BP == 1 ]] && torch_bench "$c-T$T-torch-bp_high-compile" "$COMPILE_TIMEOUT" "$c" "$T" --compile --attention bp_high
      render >/dev/null
    done
  done
fi
echo "bench_gpu: done in $((SECONDS - t_start)) s; table in $table, logs and JSON in $dir"
echo
render
