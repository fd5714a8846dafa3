#!/usr/bin/env python3
"""The PyTorch twin of `saobp bench`: the same model, batch shape and training step, timed the
same way, so that tools/compare.sh can print saobp's speed as a ratio of PyTorch's.

    python3 tools/bench_pytorch.py CONFIG [section.key=value ...] [--gather | --finetune glue/sst2]
                                   [--device cpu|cuda[:N]] [--compile] [--sdpa] [--bf16]
                                   [--attention original|bp_high|bp_low]
                                   [--warmup N] [--steps N] [--json FILE] [--saobp build/saobp]

The run config is resolved by saobp itself (`saobp bench CONFIG ... --print-config` prints the
resolved TOML: presets, family defaults and overrides applied), so both sides see the same
sizes. The models are written here in plain torch.nn (transformers is not needed), laid out
as Hugging Face's:

- bert: BertForMaskedLM. Word + position + token-type embeddings, LayerNorm, dropout; post-LN
  blocks (q, k, v, softmax(q k^T / sqrt(HS) + additive key mask) v, output dense, dropout,
  residual, LayerNorm; intermediate dense, exact-erf GELU, output dense, dropout, residual,
  LayerNorm), LayerNorm eps 1e-12; MLM head dense + GELU + LayerNorm + decoder tied to the
  word embeddings + bias. Attention-probability dropout 0, as saobp's config.json says.
  Loss: HF semantics by default (logits for all B*T positions, cross-entropy with
  ignore_index=-100); --gather computes the head only at the masked positions (saobp's way).
- bert --finetune glue/sst2: BertForSequenceClassification, the fine-tuning step of
  `saobp bench --finetune glue/sst2` (saobp finetune's step). The same encoder (no MLM head),
  then HF's pooler (dense + tanh on the [CLS] state), dropout (hidden_dropout_prob, as HF's
  classifier_dropout = None) and classifier (2 labels); cross-entropy over the B rows. Batches
  as saobp's fine-tuning bench: every row [CLS] + T-2 random tokens + [SEP] (full length, no
  padding, token types 0 as SST-2's single sentences), random 0/1 labels.
- gpt2: GPT2LMHeadModel. Token + position embeddings, dropout; pre-LN blocks (ln_1, c_attn
  Conv1D, causal softmax attention, c_proj, dropout, residual; ln_2, c_fc, tanh GELU, c_proj,
  dropout, residual), ln_f, LM head tied to wte; eps 1e-5; loss over next-token targets.

The step is the trainer's: forward, loss, backward, clip_grad_norm_(grad_clip), AdamW (decay
on tensors of dim >= 2 only, betas/eps/weight decay from the config, the trainer's
warmup-cosine lr), zero_grad. Batches (pretraining): the synthetic source's shape (CLS,
2*((T-2)/2) tokens, SEP; each of those positions masked with probability
data.mlm_probability); --finetune: the rows above. Threads:
train.threads, or the number of usable cores when 0 (OpenMP's default, which saobp uses).

Attention: `original` by default, the baseline saobp's variants are compared against, whatever
the config's model.attention. Its attention is written out (matmul, mask, softmax, matmul: HF's
"eager" attention); --sdpa uses F.scaled_dot_product_attention instead (HF's default "sdpa"
attention; the key mask, and for GPT-2 the causal mask, as one additive attn_mask; no dropout).
--attention bp_high (or bp_low) is SAOBP written as plain tensor ops (saobp_beliefs below), with
the config's bp_steps, lambda / layer_lambdas, learnable_lambda and leaky_bp: what a researcher
would write in PyTorch, and what torch.compile gets to fuse (issue 23's baseline for bp_high).
tests/tools/check_torch_saobp.py checks it against `saobp explain`.

--bf16: the forward and loss under torch.autocast(dtype=torch.bfloat16) (bf16 GEMMs with f32
accumulation, softmax, LayerNorm and the loss in f32 as autocast casts them), f32 weights,
gradients and AdamW state: PyTorch's mixed precision. With --device cuda only.

--device cpu (the default) is the CPU bench above, unchanged. --device cuda (or cuda:N): the
GPU twin of `saobp bench ... train.device=cuda` (tools/bench_gpu.sh runs both):
- f32 throughout, TF32 off (torch.backends.cuda.matmul.allow_tf32 = False,
  torch.backends.cudnn.allow_tf32 = False, torch.set_float32_matmul_precision("highest")), as
  saobp's f32 GEMMs.
- The model is built and initialized on the host (the same weights as on the CPU), then moved
  to the GPU. Each step's batches are generated on the host exactly as above, outside the timed
  region, and copied to the GPU before it (saobp also makes them outside its timed region but
  copies its few-KiB id/label/mask tensors to the GPU inside it: a negligible difference).
- Optimizer: torch.optim.AdamW(fused=True), the fastest eager AdamW a PyTorch user has on a
  GPU (on the CPU: the default, neither fused nor foreach, as before). Clipping:
  clip_grad_norm_ with its default (foreach on CUDA tensors).
- The step is the same (including loss.item() per micro-batch, which synchronizes, as saobp's
  step reads its loss). Timing: torch.cuda.synchronize(), a CUDA event before the step and one
  after zero_grad, synchronize, elapsed time between them; median over the timed steps.
- Peak memory: torch.cuda.reset_peak_memory_stats() before the model is moved to the GPU, then
  torch.cuda.max_memory_allocated() after the last step (the most bytes of live tensors at any
  time of the run: weights, AdamW state, gradients, activations), as saobp's
  peak_device_memory_gib; max_memory_reserved (the caching allocator's footprint) beside it.
- The JSON also gives the device name, the driver (nvidia-smi, else NVML), the CUDA version
  torch was built with (torch.version.cuda) and the driver's CUDA version.

--compile: the loss function (model.loss: embeddings, blocks, head, cross-entropy) wrapped in
torch.compile (default mode, no options; backward compiled by AOTAutograd); the optimizer,
clipping and loss.item() stay eager, as a user compiling the model would have them. Compilation
happens in the first warm-up step (forward) and its backward: at least 2 warm-up steps are
required and the JSON's compile_s is the wall time of the first step (compilation included);
the timed steps come after the warm-up as usual. Needs torch >= 2.0 (Debian's 1.13 has no
torch.compile). On the CPU it compiles too (Inductor's C++ backend), but the CPU comparison
of tools/compare.sh is eager.
"""
import argparse
import json
import math
import re
import os
import statistics
import subprocess
import sys
import time
import tomllib

import torch
import torch.nn as nn
import torch.nn.functional as F

CLS, SEP, MASK, FIRST_REGULAR = 2, 3, 4, 5


# ---------------------------------------------------------------------------------- SAOBP
def masked_softmax(x, allowed):
    """softmax of x over the allowed entries of each row; 0 elsewhere (a row with no allowed entry: 0)."""
    p = torch.softmax(x.masked_fill(~allowed, float("-inf")), dim=-1)
    return torch.where(allowed, p, torch.zeros((), dtype=p.dtype, device=p.device))


def saobp_beliefs(s, allowed, sender, c, steps, causal):
    """SAOBP's refined attention from the scaled scores s [B, NH, T, T] (docs/saobp-gradients.md
    §2-§4) in plain tensor ops, autograd doing the backward: A = softmax(s), then `steps` times
    F_ik = log(1 - c A_ik) over the sender rows i, G_jk = Σ_{sender i != j} F_ik (causal: i < j,
    an exclusive prefix down the rows), A = softmax(s + G). allowed [B or 1, 1 or NH, T, T] bool:
    key k is a token (and k <= j when causal); sender [B, 1, T, 1]: row i is a token; c [NH]."""
    b = masked_softmax(s, allowed)
    cc = c.view(1, -1, 1, 1)
    for _ in range(steps):
        F_ = torch.log1p(-cc * b) * sender
        G = torch.cumsum(F_, dim=-2) - F_ if causal else F_.sum(dim=-2, keepdim=True) - F_
        b = masked_softmax(s + G, allowed)
    return b


def potts_c(lam, high):
    """The Potts constant of λ (a tensor): 1 - e^-λ for BP-High, 1 - e^λ for BP-Low (formulas.h potts_c)."""
    return -torch.expm1(-lam) if high else -torch.expm1(lam)


class SaobpAttention(nn.Module):
    """The Potts variants' λ of one layer (one per head; a parameter when model.learnable_lambda)
    and the refinement of the scores."""

    def __init__(self, NH, bp):
        super().__init__()
        lam = torch.full((NH,), float(bp["lambda"]))
        self.lam = nn.Parameter(lam, requires_grad=bp["learnable"])
        self.high, self.steps, self.leak = bp["variant"] == "bp_high", bp["steps"], bp["leak"]

    def forward(self, s, allowed, sender, causal):
        return saobp_beliefs(s, allowed, sender, potts_c(self.lam, self.high), self.steps, causal and not self.leak)


def bp_settings(m, variant):
    """The BP variants' settings of each layer from the resolved model config."""
    lams = m.get("layer_lambdas") or [m["lambda"]] * m["layers"]
    return [{"variant": variant, "lambda": lams[i], "steps": m["bp_steps"], "learnable": m["learnable_lambda"],
             "leak": m.get("leaky_bp", False)} for i in range(m["layers"])]


# ----------------------------------------------------------------------------------- BERT
class BertSelfAttention(nn.Module):
    def __init__(self, C, NH, bp=None):
        super().__init__()
        self.NH, self.HS = NH, C // NH
        self.query, self.key, self.value = nn.Linear(C, C), nn.Linear(C, C), nn.Linear(C, C)
        self.sdpa = False  # --sdpa
        self.bp = SaobpAttention(NH, bp) if bp else None  # --attention bp_high / bp_low

    def forward(self, x, ext_mask):
        B, T, C = x.shape
        q = self.query(x).view(B, T, self.NH, self.HS).transpose(1, 2)
        k = self.key(x).view(B, T, self.NH, self.HS).transpose(1, 2)
        v = self.value(x).view(B, T, self.NH, self.HS).transpose(1, 2)
        if self.bp is not None:  # ext_mask [B, 1, 1, T] is 0 on the tokens
            tokens = ext_mask == 0
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.HS)
            b = self.bp(s, tokens, tokens.transpose(-1, -2).to(s.dtype), False)
            return torch.matmul(b, v).transpose(1, 2).reshape(B, T, C)
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=ext_mask).transpose(1, 2).reshape(B, T, C)
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.HS) + ext_mask
        a = torch.softmax(s, dim=-1)  # attention_probs_dropout_prob = 0
        return torch.matmul(a, v).transpose(1, 2).reshape(B, T, C)


class BertAttention(nn.Module):
    def __init__(self, C, NH, p, bp=None):
        super().__init__()
        self.self = BertSelfAttention(C, NH, bp)
        self.output = nn.Module()
        self.output.dense, self.output.LayerNorm = nn.Linear(C, C), nn.LayerNorm(C, eps=1e-12)
        self.drop = nn.Dropout(p)

    def forward(self, x, ext_mask):
        return self.output.LayerNorm(x + self.drop(self.output.dense(self.self(x, ext_mask))))


class BertLayer(nn.Module):
    def __init__(self, C, NH, I, p, bp=None):
        super().__init__()
        self.attention = BertAttention(C, NH, p, bp)
        self.intermediate = nn.Module()
        self.intermediate.dense = nn.Linear(C, I)
        self.output = nn.Module()
        self.output.dense, self.output.LayerNorm = nn.Linear(I, C), nn.LayerNorm(C, eps=1e-12)
        self.drop = nn.Dropout(p)

    def forward(self, x, ext_mask):
        x = self.attention(x, ext_mask)
        h = self.output.dense(F.gelu(self.intermediate.dense(x)))  # exact erf GELU
        return self.output.LayerNorm(x + self.drop(h))


class BertEncoder(nn.Module):  # HF's BertModel without its pooler: embeddings and the blocks
    def __init__(self, m, bp=None):
        super().__init__()
        C, V, p = m["hidden"], m["vocab_size"], m["dropout"]
        bp = bp or [None] * m["layers"]
        self.word_embeddings = nn.Embedding(V, C)
        self.position_embeddings = nn.Embedding(m["max_positions"], C)
        self.token_type_embeddings = nn.Embedding(2, C)
        self.emb_ln, self.emb_drop = nn.LayerNorm(C, eps=1e-12), nn.Dropout(p)
        self.layer = nn.ModuleList(BertLayer(C, m["heads"], m["intermediate"], p, bp[i]) for i in range(m["layers"]))

    def encode(self, ids, key_mask, type_ids=None):
        B, T = ids.shape
        pos = torch.arange(T, device=ids.device).unsqueeze(0)
        types = torch.zeros_like(ids) if type_ids is None else type_ids
        x = self.word_embeddings(ids) + self.position_embeddings(pos) + self.token_type_embeddings(types)
        x = self.emb_drop(self.emb_ln(x))
        ext = (1.0 - key_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min  # HF's extended mask
        for layer in self.layer:
            x = layer(x, ext)
        return x


class BertForMaskedLM(BertEncoder):
    def __init__(self, m, bp=None):
        super().__init__(m, bp)
        C, V = m["hidden"], m["vocab_size"]
        self.transform_dense, self.transform_ln = nn.Linear(C, C), nn.LayerNorm(C, eps=1e-12)
        self.decoder_bias = nn.Parameter(torch.zeros(V))
        init_weights(self)

    def head(self, h):  # cls.predictions: transform, then the decoder tied to the word embeddings
        h = self.transform_ln(F.gelu(self.transform_dense(h)))
        return F.linear(h, self.word_embeddings.weight, self.decoder_bias)

    def loss(self, ids, key_mask, labels, gather):
        h = self.encode(ids, key_mask)
        if gather:  # only the masked rows go through the head (saobp's mlm_loss)
            flat = labels.view(-1)
            rows = (flat != -100).nonzero().squeeze(1)
            return F.cross_entropy(self.head(h.view(-1, h.size(-1))[rows]), flat[rows])
        logits = self.head(h)  # HF: logits for every position, ignore_index -100
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1), ignore_index=-100)


class BertForSequenceClassification(BertEncoder):
    """HF's BertForSequenceClassification: bert.pooler (dense + tanh on the [CLS] state), dropout
    (classifier_dropout None: hidden_dropout_prob), classifier; cross-entropy (K > 1 labels)."""

    def __init__(self, m, labels, bp=None):
        super().__init__(m, bp)
        C = m["hidden"]
        self.pooler_dense, self.cls_drop = nn.Linear(C, C), nn.Dropout(m["dropout"])
        self.classifier = nn.Linear(C, labels)
        init_weights(self)

    def loss(self, ids, key_mask, labels, gather, type_ids=None):
        h = self.encode(ids, key_mask, type_ids)  # every position through the encoder, as HF's BertModel
        pooled = torch.tanh(self.pooler_dense(h[:, 0]))
        return F.cross_entropy(self.classifier(self.cls_drop(pooled)), labels)


# ---------------------------------------------------------------------------------- GPT-2
class Conv1D(nn.Module):  # HF's Conv1D: x @ W + b with W [in, out]
    def __init__(self, nin, nout):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.empty(nin, nout)), nn.Parameter(torch.zeros(nout))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight).view(*x.shape[:-1], -1)


class GPT2Block(nn.Module):
    def __init__(self, C, NH, I, p, bp=None):
        super().__init__()
        self.NH, self.HS = NH, C // NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
        self.c_attn, self.attn_proj = Conv1D(C, 3 * C), Conv1D(C, C)
        self.c_fc, self.mlp_proj = Conv1D(C, I), Conv1D(I, C)
        self.resid_drop, self.mlp_drop = nn.Dropout(p), nn.Dropout(p)
        self.sdpa = False  # --sdpa
        self.bp = SaobpAttention(NH, bp) if bp else None  # --attention bp_high / bp_low

    def forward(self, x, ext_mask, causal):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, self.HS).transpose(1, 2) for t in (q, k, v))
        if self.bp is not None:  # ext_mask [B, 1, 1, T]: the key mask's term, 0 on the tokens
            tokens = ext_mask == 0
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.HS)
            b = self.bp(s, causal & tokens, tokens.transpose(-1, -2).to(s.dtype), True)
            a = torch.matmul(b, v).transpose(1, 2).reshape(B, T, C)
        elif self.sdpa:  # ext_mask: the causal and key masks as one additive [B, 1, T, T] mask
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=ext_mask).transpose(1, 2).reshape(B, T, C)
        else:
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.HS)
            s = torch.where(causal, s, torch.tensor(torch.finfo(s.dtype).min, device=s.device)) + ext_mask
            a = torch.matmul(torch.softmax(s, dim=-1), v).transpose(1, 2).reshape(B, T, C)
        x = x + self.resid_drop(self.attn_proj(a))
        h = self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x + self.mlp_drop(h)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, m, bp=None):
        super().__init__()
        C, V, p = m["hidden"], m["vocab_size"], m["dropout"]
        bp = bp or [None] * m["layers"]
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(m["max_positions"], C)
        self.drop = nn.Dropout(p)
        self.h = nn.ModuleList(GPT2Block(C, m["heads"], m["intermediate"], p, bp[i]) for i in range(m["layers"]))
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        init_weights(self)

    def loss(self, ids, key_mask, targets, gather):
        B, T = ids.shape
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(T, device=ids.device).unsqueeze(0)))
        causal = torch.ones(T, T, dtype=torch.bool, device=ids.device).tril().view(1, 1, T, T)
        ext = (1.0 - key_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        if self.h[0].sdpa:  # one additive mask: min where j > i, else the key mask's term
            ext = torch.where(causal, ext, torch.tensor(torch.finfo(torch.float32).min, device=ids.device))
        for block in self.h:
            x = block(x, ext, causal)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head, no bias
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-100)


def init_weights(model):
    for name, p in model.named_parameters():
        if name.endswith(".lam"):  # SAOBP's λ keeps the config's value
            continue
        if p.dim() >= 2:
            nn.init.normal_(p, 0.0, 0.02)
        elif "ln" in name.lower() or "layernorm" in name.lower():
            nn.init.ones_(p) if name.endswith("weight") else nn.init.zeros_(p)
        else:
            nn.init.zeros_(p)


# ---------------------------------------------------------------------------------- batches
def mlm_batch(B, T, V, prob, g):
    half = (T - 2) // 2
    ids = torch.zeros(B, T, dtype=torch.long)
    toks = torch.randint(FIRST_REGULAR, V, (B, half), generator=g)
    ids[:, 0], ids[:, 1:1 + half], ids[:, 1 + half:1 + 2 * half], ids[:, 1 + 2 * half] = CLS, toks, toks, SEP
    labels = torch.full((B, T), -100, dtype=torch.long)
    pick = torch.zeros(B, T, dtype=torch.bool)
    pick[:, 1:1 + 2 * half] = torch.rand(B, 2 * half, generator=g) < prob
    labels[pick] = ids[pick]
    ids[pick] = MASK  # (saobp keeps 10% / randomizes 10%; irrelevant to the cost)
    return ids, labels, torch.ones(B, T, dtype=torch.uint8)


def sst2_batch(B, T, V, g):
    """saobp bench --finetune glue/sst2's rows: [CLS] + T-2 random regular tokens + [SEP], full length."""
    ids = torch.empty(B, T, dtype=torch.long)
    ids[:, 0], ids[:, 1:T - 1], ids[:, T - 1] = CLS, torch.randint(FIRST_REGULAR, V, (B, T - 2), generator=g), SEP
    labels = torch.randint(0, 2, (B,), generator=g)
    return ids, labels, torch.ones(B, T, dtype=torch.uint8)


def clm_batch(B, T, V, g):
    half = T // 2
    s = torch.randint(FIRST_REGULAR, V, (B, half), generator=g)
    ids = torch.cat([s, s, s], dim=1)[:, :T].contiguous()
    targets = torch.full((B, T), -100, dtype=torch.long)
    targets[:, :-1] = ids[:, 1:]
    return ids, targets, torch.ones(B, T, dtype=torch.uint8)


def lr_at(t, step):  # the trainer's warmup + cosine schedule (src/optim/schedule.h)
    lr, min_lr, warm, total = t["lr"], t["min_lr"], t["warmup_steps"], t["max_steps"]
    if step < warm:
        return lr * step / warm
    if step > total:
        return min_lr
    f = 0.5 * (1 + math.cos(math.pi * (step - warm) / (total - warm)))
    return lr * (f * (1 - min_lr / lr) + min_lr / lr)


# ------------------------------------------------------------------------------------- BLAS
def blas_report():
    """What torch says it was built with, and the BLAS library actually mapped into the process
    after a matmul (Debian's torch links libblas.so.3 / liblapack.so.3, which the alternatives
    system points at the reference BLAS, OpenBLAS, BLIS or MKL)."""
    torch.matmul(torch.ones(64, 64), torch.ones(64, 64))
    cfg = torch.__config__.show()
    built = [f for f in re.split(r"[\s,]+", cfg) if f.startswith(("BLAS_INFO=", "LAPACK_INFO="))]
    mapped = set()
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            base = os.path.basename(path).lower()
            if any(k in base for k in ("blas", "mkl", "blis", "lapack")):
                mapped.add(os.path.realpath(path))
    return built, sorted(mapped)


def cpu_times():
    """(steal, total, busy, self) CPU time in clock ticks, or None (as saobp bench reads it):
    /proc/stat's cpu line (busy = user + nice + system + irq + softirq) and this process's
    utime + stime (/proc/self/stat fields 14 and 15)."""
    try:
        with open("/proc/stat") as f:
            v = [float(x) for x in f.readline().split()[1:9]]
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # from field 3 (state) on
        return v[7], sum(v), v[0] + v[1] + v[2] + v[5] + v[6], float(fields[11]) + float(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def steal_fraction(a, b):
    if a is None or b is None or b[1] <= a[1]:
        return -1.0
    return (b[0] - a[0]) / (b[1] - a[1])


def others_fraction(a, b):
    """Share of all CPU time that the machine's other processes ran between a and b."""
    if a is None or b is None or b[1] <= a[1]:
        return -1.0
    return max(0.0, ((b[2] - a[2]) - (b[3] - a[3])) / (b[1] - a[1]))


# -------------------------------------------------------------------------------------- GPU
def setup_cuda(spec):
    """The CUDA device of --device cuda[:N], with TF32 off; exits with a message when there is none."""
    if not torch.cuda.is_available():
        built = torch.version.cuda
        sys.exit(f"bench_pytorch: --device {spec}: no CUDA device is usable here (torch {torch.__version__}, "
                 + (f"built with CUDA {built}; " if built else "built without CUDA; ")
                 + "torch.cuda.is_available() is False). Run it on a GPU machine, or use --device cpu.")
    dev = torch.device(spec)
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        sys.exit(f"bench_pytorch: --device {spec}: there are {torch.cuda.device_count()} CUDA devices")
    dev = torch.device("cuda", index)
    torch.cuda.set_device(dev)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return dev


def cuda_report(dev):
    """Device name, driver version and CUDA versions, for the log and the JSON."""
    info = {"device_name": torch.cuda.get_device_name(dev), "cuda_version": torch.version.cuda,
            "cudnn_version": torch.backends.cudnn.version(), "driver": None, "driver_cuda_version": None,
            "capability": ".".join(map(str, torch.cuda.get_device_capability(dev))),
            "memory_gib": torch.cuda.get_device_properties(dev).total_memory / 2**30}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i",
                              str(dev.index)], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            info["driver"] = out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError):
        pass
    if info["driver"] is None:
        try:
            import pynvml
            pynvml.nvmlInit()
            v = pynvml.nvmlSystemGetDriverVersion()
            info["driver"] = v.decode() if isinstance(v, bytes) else v
        except Exception:  # no NVML either: left null
            pass
    try:
        v = torch._C._cuda_getDriverVersion()  # e.g. 13000: the newest CUDA the driver runs
        info["driver_cuda_version"] = f"{v // 1000}.{v % 1000 // 10}"
    except Exception:
        pass
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("overrides", nargs="*")
    ap.add_argument("--gather", action="store_true", help="MLM head only at the masked positions (saobp's way)")
    ap.add_argument("--finetune", default="", metavar="TASK",
                    help="the fine-tuning step instead (glue/sst2: BertForSequenceClassification, 2 labels)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--json", default="")
    ap.add_argument("--saobp", default=os.environ.get("SAOBP", "build/saobp"), help="the saobp binary")
    ap.add_argument("--allow-any-blas", action="store_true", help="do not stop when OpenBLAS is not the BLAS in use")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda / cuda:N (the GPU twin of saobp bench "
                    "train.device=cuda: f32, TF32 off, fused AdamW, CUDA-event timing, peak memory)")
    ap.add_argument("--compile", action="store_true", help="wrap the loss function (the model) in torch.compile "
                    "(default mode); compilation happens in the warm-up steps and is reported apart")
    ap.add_argument("--sdpa", action="store_true", help="attention by F.scaled_dot_product_attention (HF's sdpa) "
                    "instead of the written-out matmul/softmax (HF's eager)")
    ap.add_argument("--attention", default="original", choices=["original", "bp_high", "bp_low"],
                    help="original (default, whatever the config says) or SAOBP as plain tensor ops with the "
                    "config's bp_steps, lambda, learnable_lambda and leaky_bp")
    ap.add_argument("--bf16", action="store_true", help="mixed precision: forward and loss under "
                    "torch.autocast(dtype=torch.bfloat16); f32 weights, gradients and AdamW state")
    a = ap.parse_args()
    if a.steps < 20:
        ap.error("--steps must be at least 20")
    if not re.fullmatch(r"cpu|cuda(:[0-9]+)?", a.device):
        ap.error(f"--device {a.device}: expected cpu, cuda or cuda:N")
    cuda = a.device.startswith("cuda")
    if a.compile and not hasattr(torch, "compile"):
        sys.exit(f"bench_pytorch: --compile needs torch >= 2.0 (torch.compile); this is torch {torch.__version__}")
    if a.sdpa and not hasattr(F, "scaled_dot_product_attention"):
        sys.exit(f"bench_pytorch: --sdpa needs torch >= 2.0 (F.scaled_dot_product_attention); this is torch {torch.__version__}")
    if a.compile and a.warmup < 2:
        ap.error("--compile needs --warmup of at least 2 (the first step compiles the forward and the backward)")
    if a.finetune and a.finetune != "glue/sst2":
        ap.error(f"--finetune {a.finetune}: only glue/sst2 (BERT sequence classification) is timed")
    if a.finetune and a.gather:
        ap.error("--gather is the MLM head's; --finetune has a classification head")
    if a.bf16 and not a.device.startswith("cuda"):
        ap.error("--bf16 is for --device cuda (CUDA autocast; Debian's torch 1.13 CPU autocast has no bf16 LayerNorm)")
    if a.sdpa and a.attention != "original":
        ap.error(f"--sdpa is softmax attention; --attention {a.attention} is written out")
    dev, gpu = (setup_cuda(a.device), None) if cuda else (None, None)  # before anything else: fail fast
    toml = subprocess.run([a.saobp, "bench", a.config, *a.overrides, "--print-config"], check=True,
                          capture_output=True, text=True).stdout
    cfg = tomllib.loads(toml)
    m, t, d = cfg["model"], cfg["train"], cfg["data"]
    threads = t["threads"] or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    torch.manual_seed(t["seed"])
    if str(t.get("device", "cpu")) != "cpu" and not cuda:
        print(f"  note: the config says train.device={t['device']}; this run is on the CPU (--device cpu)")

    built, mapped = blas_report()
    print(f"bench_pytorch: torch {torch.__version__}, built with {' '.join(built) or '(no BLAS_INFO)'}")
    print(f"  BLAS mapped in this process: {', '.join(mapped) or '(none found)'}")
    if cuda:
        gpu = cuda_report(dev)
        print(f"  device {dev}: {gpu['device_name']} (compute capability {gpu['capability']}, "
              f"{gpu['memory_gib']:.1f} GiB), driver {gpu['driver'] or '(unknown)'} (CUDA "
              f"{gpu['driver_cuda_version'] or '?'}), torch built with CUDA {gpu['cuda_version']}, "
              f"cuDNN {gpu['cudnn_version']}; TF32 off (matmul and cuDNN), float32 matmul precision highest")
    elif not any("openblas" in p for p in mapped):
        msg = "OpenBLAS is not the BLAS torch uses here; see tools/compare.sh (update-alternatives libblas.so.3)"
        if not a.allow_any_blas:
            sys.exit("bench_pytorch: " + msg)
        print("  WARNING: " + msg)

    family, B, T, accum = m["family"], t["batch_size"], t["seq_len"], t["grad_accum"]
    if a.finetune and family != "bert":
        sys.exit(f"bench_pytorch: --finetune {a.finetune} needs a BERT config (model.family is {family})")
    bp = bp_settings(m, a.attention) if a.attention != "original" else None
    if a.finetune:
        model = BertForSequenceClassification(m, 2, bp)
    else:
        model = BertForMaskedLM(m, bp) if family == "bert" else GPT2LMHeadModel(m, bp)
    if a.sdpa:
        for mod in model.modules():
            if hasattr(mod, "sdpa"):
                mod.sdpa = True
    if cuda:  # initialized on the host (the CPU run's weights), then moved
        torch.cuda.reset_peak_memory_stats(dev)
        model.to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": t["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=t["lr"], betas=(t["beta1"], t["beta2"]), eps=t["eps"],
                            **({"fused": True} if cuda else {}))
    model.train()
    loss_fn = model.loss
    if a.compile:
        loss_fn = torch.compile(model.loss)
    n_params = sum(p.numel() for p in model.parameters())
    mode = ("gather (head at masked positions)" if a.gather else "HF (head at all positions)") if family == "bert" else ""
    if a.finetune:
        mode = f"fine-tuning {a.finetune} (BertForSequenceClassification, 2 labels; rows of T tokens, no padding)"
    attention = ("original (PyTorch baseline)" if a.attention == "original" else
                 f"{a.attention} as plain tensor ops ({m['bp_steps']} BP step(s), λ {m['lambda']}"
                 + (", learnable" if m["learnable_lambda"] else "") + (", leaky" if m.get("leaky_bp") else "") + ")")
    precision = "bf16 autocast" if a.bf16 else "f32"
    print(f"  {family} {m['preset']} ({n_params} parameters), attention {attention}, B={B} T={T} "
          f"grad_accum={accum} ({B * T * accum} tokens/step), {threads} threads, {precision} {mode}")
    if cuda or a.compile or a.sdpa:
        print(f"  on {dev if cuda else 'cpu'}: {'torch.compile (default mode) of the loss function' if a.compile else 'eager'}, "
              f"attention {'F.scaled_dot_product_attention' if a.sdpa else 'written out (matmul, softmax)'}, "
              f"AdamW {'fused=True' if cuda else 'default (for-loop)'}, clip_grad_norm_ default")
    if m["attention"] != a.attention:
        print(f"  note: the config asks for attention {m['attention']}; this run uses {a.attention} (--attention)")

    g = torch.Generator().manual_seed(t["seed"])
    times, loss = [], 0.0
    cpu0 = None
    compile_s = None
    if cuda:
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for step in range(a.warmup + a.steps):
        if a.finetune:
            batches = [sst2_batch(B, T, m["vocab_size"], g) for _ in range(accum)]
        else:
            batches = [mlm_batch(B, T, m["vocab_size"], d["mlm_probability"], g) if family == "bert"
                       else clm_batch(B, T, m["vocab_size"], g) for _ in range(accum)]
        for group in opt.param_groups:
            group["lr"] = lr_at(t, step)
        if cuda:  # copied before the timed region; the GPU idle when it starts
            batches = [tuple(x.to(dev) for x in b) for b in batches]
            torch.cuda.synchronize(dev)
        if step == a.warmup:
            cpu0 = cpu_times()
        t0 = time.perf_counter()
        if cuda:
            ev0.record()
        loss_sum = 0.0
        for ids, labels, key_mask in batches:
            with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16, enabled=a.bf16):
                l = loss_fn(ids, key_mask, labels, a.gather)
            loss_sum += l.item()
            (l / accum).backward()
        if t["grad_clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), t["grad_clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)  # as saobp, which drops the gradients (the next backward writes them)
        if cuda:
            ev1.record()
            ev1.synchronize()
            dt = ev0.elapsed_time(ev1) / 1e3
        else:
            dt = time.perf_counter() - t0
        if step == 0 and a.compile:
            compile_s = time.perf_counter() - t0
        loss = loss_sum / accum
        if step >= a.warmup:
            times.append(dt)
    cpu1 = cpu_times()
    steal, others = steal_fraction(cpu0, cpu1), others_fraction(cpu0, cpu1)
    tokens = B * T * accum
    med = statistics.median(times)
    print(f"steps: {a.warmup} warm-up, {len(times)} timed; last loss {loss:.4f}")
    print(f"ms/step: median {1e3 * med:.1f} (min {1e3 * min(times):.1f}, max {1e3 * max(times):.1f})")
    print(f"tokens/s: {tokens / med:.0f} (median step)")
    peak = reserved = None
    if cuda:
        peak = torch.cuda.max_memory_allocated(dev) / 2**30
        reserved = torch.cuda.max_memory_reserved(dev) / 2**30
        print(f"peak device memory: {peak:.3f} GiB allocated (max_memory_allocated), {reserved:.3f} GiB reserved")
    if compile_s is not None:
        print(f"compile: first step {compile_s:.1f} s wall (torch.compile of the forward and backward included)")
    if steal >= 0:
        print(f"machine: {100 * steal:.1f}% of CPU time stolen by the hypervisor during the timed steps")
    if others >= 0:
        print(f"machine: {100 * others:.1f}% of CPU time used by other processes during the timed steps"
              + (" (a busy machine: these times are not representative)" if others > 0.05 else ""))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tool": "pytorch", "torch": torch.__version__, "blas": mapped, "family": family,
                       "mode": "finetune" if a.finetune else "pretrain", "task": a.finetune, "gather": a.gather, "batch_size": B, "seq_len": T, "grad_accum": accum,
                       "tokens_per_step": tokens, "threads": threads, "warmup": a.warmup, "steps": len(times),
                       "ms_per_step_median": 1e3 * med, "ms_per_step_min": 1e3 * min(times),
                       "ms_per_step_max": 1e3 * max(times), "tokens_per_s": tokens / med, "loss": loss,
                       "steal_fraction": steal, "others_fraction": others,
                       "device": str(dev) if cuda else "cpu", "compile": a.compile, "compile_s": compile_s,
                       "sdpa": a.sdpa, "attention": a.attention, "precision": "bf16" if a.bf16 else "f32",
                       "optimizer": "AdamW(fused=True)" if cuda else "AdamW",
                       "tf32": False if cuda else None, "peak_device_memory_gib": peak,
                       "peak_device_memory_reserved_gib": reserved, **(gpu or {})}, f, indent=2)


if __name__ == "__main__":
    main()
