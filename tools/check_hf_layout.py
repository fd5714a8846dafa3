#!/usr/bin/python3
"""Checks that a saobp checkpoint loads into Hugging Face's module layout unchanged.

  tools/check_hf_layout.py CHECKPOINT_DIR INSPECT_FILE

`transformers` is not packaged in Debian 12, so this builds BertForMaskedLM / GPT2LMHeadModel
in plain torch with exactly Hugging Face's module tree and parameter names (bert.embeddings.*,
bert.encoder.layer.{i}.attention.self.query ..., cls.predictions.*; transformer.h.{i}.attn.c_attn
with Conv1D weights stored (in, out) ...), loads model.safetensors with load_state_dict the way
`from_pretrained` does (the tied decoder / lm_head weights are the only keys allowed to be
missing, no key may be unexpected, every shape must match), runs the input of INSPECT_FILE
(written by `saobp inspect --checkpoint DIR --ids ...` on the same checkpoint) and compares the
logits with saobp's. Only `original` attention exists in Hugging Face's models.
"""
import json
import math
import struct
import sys

import numpy as np
import torch
from torch import nn

DTYPES = {"F32": np.float32, "F64": np.float64, "I32": np.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out, header.get("__metadata__", {})


class Linear(nn.Linear):
    pass


def ns(**kw):  # an nn.Module holding named children, to mirror HF's attribute paths
    m = nn.Module()
    for k, v in kw.items():
        setattr(m, k, v)
    return m


class BertForMaskedLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        C, I, V, eps = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["layer_norm_eps"]
        self.nh = c["num_attention_heads"]
        emb = ns(word_embeddings=nn.Embedding(V, C), position_embeddings=nn.Embedding(c["max_position_embeddings"], C),
                 token_type_embeddings=nn.Embedding(c["type_vocab_size"], C), LayerNorm=nn.LayerNorm(C, eps=eps))
        layers = nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layers.append(ns(
                attention=ns(self=ns(query=nn.Linear(C, C), key=nn.Linear(C, C), value=nn.Linear(C, C)),
                             output=ns(dense=nn.Linear(C, C), LayerNorm=nn.LayerNorm(C, eps=eps))),
                intermediate=ns(dense=nn.Linear(C, I)),
                output=ns(dense=nn.Linear(I, C), LayerNorm=nn.LayerNorm(C, eps=eps))))
        self.bert = ns(embeddings=emb, encoder=ns(layer=layers))
        self.cls = ns(predictions=ns(transform=ns(dense=nn.Linear(C, C), LayerNorm=nn.LayerNorm(C, eps=eps)),
                                     decoder=nn.Linear(C, V)))
        self.cls.predictions.bias = nn.Parameter(torch.zeros(V))
        self.tied = ["cls.predictions.decoder.weight", "cls.predictions.decoder.bias"]

    def tie(self):
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight
        self.cls.predictions.decoder.bias = self.cls.predictions.bias

    def forward(self, ids):
        B, T = ids.shape
        e = self.bert.embeddings
        x = e.word_embeddings(ids) + e.position_embeddings(torch.arange(T))[None] + e.token_type_embeddings(
            torch.zeros_like(ids))
        x = e.LayerNorm(x)
        gelu = lambda t: 0.5 * t * (1 + torch.erf(t / math.sqrt(2)))  # noqa: E731 ("gelu", exact erf)
        for L in self.bert.encoder.layer:
            s = L.attention.self
            heads = lambda t: t.view(B, T, self.nh, -1).transpose(1, 2)  # noqa: E731
            q, k, v = heads(s.query(x)), heads(s.key(x)), heads(s.value(x))
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v
            a = a.transpose(1, 2).reshape(B, T, -1)
            x = L.attention.output.LayerNorm(L.attention.output.dense(a) + x)
            x = L.output.LayerNorm(L.output.dense(gelu(L.intermediate.dense(x))) + x)
        p = self.cls.predictions
        return p.decoder(p.transform.LayerNorm(gelu(p.transform.dense(x))))


class Conv1D(nn.Module):  # HF's Conv1D: weight (in, out)
    def __init__(self, nin, nout):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(nin, nout))
        self.bias = nn.Parameter(torch.zeros(nout))

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2LMHeadModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        C, V, eps = c["n_embd"], c["vocab_size"], c["layer_norm_epsilon"]
        I = c.get("n_inner") or 4 * C
        self.nh = c["n_head"]
        h = nn.ModuleList()
        for _ in range(c["n_layer"]):
            h.append(ns(ln_1=nn.LayerNorm(C, eps=eps), attn=ns(c_attn=Conv1D(C, 3 * C), c_proj=Conv1D(C, C)),
                        ln_2=nn.LayerNorm(C, eps=eps), mlp=ns(c_fc=Conv1D(C, I), c_proj=Conv1D(I, C))))
        self.transformer = ns(wte=nn.Embedding(V, C), wpe=nn.Embedding(c["n_positions"], C), h=h,
                              ln_f=nn.LayerNorm(C, eps=eps))
        self.lm_head = nn.Linear(C, V, bias=False)
        self.tied = ["lm_head.weight"]

    def tie(self):
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, ids):
        B, T = ids.shape
        t = self.transformer
        x = t.wte(ids) + t.wpe(torch.arange(T))[None]
        gelu = lambda z: 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))  # noqa: E731
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        for blk in t.h:
            q, k, v = blk.attn.c_attn(blk.ln_1(x)).split(x.shape[-1], dim=-1)
            heads = lambda z: z.view(B, T, self.nh, -1).transpose(1, 2)  # noqa: E731
            q, k, v = heads(q), heads(k), heads(v)
            s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~causal, float("-inf"))
            a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, -1)
            x = x + blk.attn.c_proj(a)
            x = x + blk.mlp.c_proj(gelu(blk.mlp.c_fc(blk.ln_2(x))))
        return self.lm_head(t.ln_f(x))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ckpt, inspect_file = sys.argv[1], sys.argv[2]
    config = json.load(open(f"{ckpt}/config.json"))
    if config.get("saobp_attention", "original") != "original":
        sys.exit(f"{ckpt}: attention '{config['saobp_attention']}' has no Hugging Face counterpart; "
                 "check an 'original' checkpoint")
    if config.get("saobp_positions", "learned") != "learned":
        sys.exit(f"{ckpt}: positions '{config['saobp_positions']}': Hugging Face's models use learned positions")
    arch = config["architectures"][0]
    model = {"BertForMaskedLM": BertForMaskedLM, "GPT2LMHeadModel": GPT2LMHeadModel}[arch](config)
    weights, _ = read_safetensors(f"{ckpt}/model.safetensors")
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    bad = [f"{k}: {tuple(v.shape)} vs {shapes[k]}" for k, v in weights.items() if k in shapes and tuple(v.shape) != shapes[k]]
    if bad:
        sys.exit("shape mismatch: " + "; ".join(bad))
    result = model.load_state_dict(weights, strict=False)
    missing = sorted(set(result.missing_keys) - set(model.tied))
    if missing or result.unexpected_keys:
        sys.exit(f"layout mismatch: missing {missing}, unexpected {result.unexpected_keys}")
    model.tie()
    model.eval()
    got, meta = read_safetensors(inspect_file)
    ids = got["ids"].long()[None]
    with torch.no_grad():
        logits = model(ids)[0].double()
    ours = got["logits"].double()
    err = (logits - ours).abs().max().item()
    scale = ours.abs().max().item()
    print(f"{arch}: {len(weights)} tensors loaded by name with HF's layout (tied: {', '.join(model.tied)}); "
          f"logits of {ids.shape[1]} tokens: max |torch - saobp| = {err:.3g} (max |logit| {scale:.3g})")
    if not err <= 1e-4 * max(1.0, scale):
        sys.exit("logits differ")


if __name__ == "__main__":
    main()
