#!/usr/bin/python3
"""Checks that saobp checkpoints load into Hugging Face's module layout unchanged.

  tools/check_hf_layout.py CHECKPOINT_DIR INSPECT_FILE [CHECKPOINT_DIR INSPECT_FILE ...]

`transformers` is not packaged in Debian 12, so this builds Hugging Face's classes in plain torch
with exactly their module tree and parameter names (bert.embeddings.*,
bert.encoder.layer.{i}.attention.self.query ..., cls.predictions.*; transformer.h.{i}.attn.c_attn
with Conv1D weights stored (in, out) ...), picks the class from config.json's "architectures":

  BertForMaskedLM                 bert (no pooler), cls.predictions (decoder tied to the embeddings)
  GPT2LMHeadModel                 transformer, lm_head (tied to wte)
  BertForSequenceClassification   bert with bert.pooler (dense + tanh on [CLS]), dropout, classifier
                                  (num_labels outputs: len(id2label); 1 for problem_type regression)
  BertForMultipleChoice           the same pooler, classifier (1): inputs (B, num_choices, T)
  BertForQuestionAnswering        bert (no pooler), qa_outputs (num_labels = 2): start, end logits
  GPT2ForSequenceClassification   transformer, score (num_labels, no bias) on the rightmost token
                                  that is not pad_token_id

loads model.safetensors with load_state_dict the way `from_pretrained` does (tied weights are the
only keys allowed to be missing, no key may be unexpected, every shape must match the one the
config implies), runs the input of INSPECT_FILE (written by `saobp inspect --checkpoint DIR
(--ids ... | --sample N)` on the same checkpoint; token types all 0, as saobp inspect runs it) and
compares the outputs with saobp's "logits" tensor: the LM logits (T, V); the K class logits or the
regression score (K); a multiple-choice row's score, the input as one example with one choice (1);
the start and end logits (T, 2). Only `original` attention exists in Hugging Face's models.
Several checkpoints are checked in one process (torch is imported once).
"""
import json
import math
import os
import sys

import torch
from torch import nn

sys.dont_write_bytecode = True  # no tools/__pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_safetensors  # noqa: E402  (tools/safetensors_io.py)

ACT = {  # transformers' ACT2FN entries that saobp's configs may name
    "gelu": lambda t: 0.5 * t * (1 + torch.erf(t / math.sqrt(2))),
    "gelu_new": lambda z: 0.5 * z * (1 + torch.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3))),
}
ACT["gelu_pytorch_tanh"] = ACT["gelu_new"]


class CheckFailed(Exception):
    pass


def read_tensors(path):
    """The tensors of a safetensors file as torch tensors by name."""
    return {name: torch.from_numpy(a) for name, a in read_safetensors(path).items()}


def ns(**kw):  # an nn.Module holding named children, to mirror HF's attribute paths
    m = nn.Module()
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def activation(c, key):
    name = c.get(key)
    if name not in ACT:
        raise CheckFailed(f"config.json {key} = {name!r}: not one of {sorted(ACT)}")
    return ACT[name]


def num_labels(c):
    """PretrainedConfig's num_labels: len(id2label) when the config has one, else num_labels (2)."""
    id2label = c.get("id2label")
    if id2label is not None:
        n = len(id2label)
        if "num_labels" in c and c["num_labels"] != n:
            raise CheckFailed(f"config.json: num_labels {c['num_labels']} but {n} entries in id2label")
        label2id = c.get("label2id", {})
        if label2id and {int(v): k for k, v in label2id.items()} != {int(k): v for k, v in id2label.items()}:
            raise CheckFailed(f"config.json: label2id {label2id} is not the inverse of id2label {id2label}")
        return n
    return c.get("num_labels", 2)


def check_problem_type(c, n):
    p = c.get("problem_type")
    allowed = ("regression", "single_label_classification", "multi_label_classification")
    if p is not None and p not in allowed:  # PretrainedConfig raises on any other value
        raise CheckFailed(f"config.json problem_type {p!r}: not one of {allowed}")
    if p == "regression" and n != 1:
        raise CheckFailed(f"config.json: problem_type regression with {n} labels (the regression head has 1 output)")
    if p == "single_label_classification" and n < 2:
        raise CheckFailed(f"config.json: problem_type single_label_classification with {n} label(s)")


class Bert(nn.Module):
    """BertModel: embeddings, encoder, and bert.pooler when add_pooling_layer."""

    def __init__(self, c, add_pooling_layer):
        super().__init__()
        C, I, V, eps = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["layer_norm_eps"]
        self.nh = c["num_attention_heads"]
        self.act = activation(c, "hidden_act")
        if c.get("position_embedding_type", "absolute") != "absolute":
            raise CheckFailed(f"position_embedding_type {c['position_embedding_type']!r}: this check builds 'absolute'")
        self.embeddings = ns(word_embeddings=nn.Embedding(V, C),
                             position_embeddings=nn.Embedding(c["max_position_embeddings"], C),
                             token_type_embeddings=nn.Embedding(c["type_vocab_size"], C),
                             LayerNorm=nn.LayerNorm(C, eps=eps))
        layers = nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layers.append(ns(
                attention=ns(self=ns(query=nn.Linear(C, C), key=nn.Linear(C, C), value=nn.Linear(C, C)),
                             output=ns(dense=nn.Linear(C, C), LayerNorm=nn.LayerNorm(C, eps=eps))),
                intermediate=ns(dense=nn.Linear(C, I)),
                output=ns(dense=nn.Linear(I, C), LayerNorm=nn.LayerNorm(C, eps=eps))))
        self.encoder = ns(layer=layers)
        if add_pooling_layer:
            self.pooler = ns(dense=nn.Linear(C, C))

    def forward(self, ids):  # token_type_ids and attention_mask left out: zeros and all ones
        B, T = ids.shape
        e = self.embeddings
        x = e.word_embeddings(ids) + e.position_embeddings(torch.arange(T))[None] + e.token_type_embeddings(
            torch.zeros_like(ids))
        x = e.LayerNorm(x)
        for L in self.encoder.layer:
            s = L.attention.self
            heads = lambda t: t.view(B, T, self.nh, -1).transpose(1, 2)  # noqa: E731
            q, k, v = heads(s.query(x)), heads(s.key(x)), heads(s.value(x))
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -1) @ v
            a = a.transpose(1, 2).reshape(B, T, -1)
            x = L.attention.output.LayerNorm(L.attention.output.dense(a) + x)
            x = L.output.LayerNorm(L.output.dense(self.act(L.intermediate.dense(x))) + x)
        pooled = torch.tanh(self.pooler.dense(x[:, 0])) if hasattr(self, "pooler") else None
        return x, pooled


class BertForMaskedLM(nn.Module):
    tied = ["cls.predictions.decoder.weight", "cls.predictions.decoder.bias"]

    def __init__(self, c):
        super().__init__()
        C, V, eps = c["hidden_size"], c["vocab_size"], c["layer_norm_eps"]
        self.bert = Bert(c, add_pooling_layer=False)
        self.cls = ns(predictions=ns(transform=ns(dense=nn.Linear(C, C), LayerNorm=nn.LayerNorm(C, eps=eps)),
                                     decoder=nn.Linear(C, V)))
        self.cls.predictions.bias = nn.Parameter(torch.zeros(V))

    def tie(self):
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight
        self.cls.predictions.decoder.bias = self.cls.predictions.bias

    def forward(self, ids):  # (1, T) -> (T, V)
        x, _ = self.bert(ids[None])
        p = self.cls.predictions
        return p.decoder(p.transform.LayerNorm(self.bert.act(p.transform.dense(x))))[0]

    def describe(self, out):
        return f"MLM logits of {out.shape[0]} tokens"


class BertForSequenceClassification(nn.Module):
    tied = []

    def __init__(self, c):
        super().__init__()
        self.num_labels = num_labels(c)
        check_problem_type(c, self.num_labels)
        self.bert = Bert(c, add_pooling_layer=True)
        p = c.get("classifier_dropout")
        self.dropout = nn.Dropout(c["hidden_dropout_prob"] if p is None else p)
        self.classifier = nn.Linear(c["hidden_size"], self.num_labels)

    def forward(self, ids):  # (T) -> (num_labels)
        _, pooled = self.bert(ids[None])
        return self.classifier(self.dropout(pooled))[0]

    def describe(self, out):
        return "regression score" if self.num_labels == 1 else f"{self.num_labels} class logits"


class BertForMultipleChoice(nn.Module):
    tied = []

    def __init__(self, c):
        super().__init__()
        self.bert = Bert(c, add_pooling_layer=True)
        p = c.get("classifier_dropout")
        self.dropout = nn.Dropout(c["hidden_dropout_prob"] if p is None else p)
        self.classifier = nn.Linear(c["hidden_size"], 1)

    def forward(self, ids):  # the row as one example with one choice: (1, 1, T) -> (1, 1) -> (1)
        ids = ids[None, None]
        num_choices = ids.shape[1]
        _, pooled = self.bert(ids.view(-1, ids.size(-1)))
        return self.classifier(self.dropout(pooled)).view(-1, num_choices)[0]

    def describe(self, out):
        return "the choice row's score"


class BertForQuestionAnswering(nn.Module):
    tied = []

    def __init__(self, c):
        super().__init__()
        self.bert = Bert(c, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(c["hidden_size"], num_labels(c))

    def forward(self, ids):  # (T) -> start, end logits stacked: (T, 2)
        x, _ = self.bert(ids[None])
        start, end = self.qa_outputs(x).split(1, dim=-1)
        return torch.stack([start.squeeze(-1), end.squeeze(-1)], -1)[0]

    def describe(self, out):
        return f"start and end logits of {out.shape[0]} tokens"


class Conv1D(nn.Module):  # HF's Conv1D: weight (in, out)
    def __init__(self, nin, nout):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(nin, nout))
        self.bias = nn.Parameter(torch.zeros(nout))

    def forward(self, x):
        return x @ self.weight + self.bias


class GPT2(nn.Module):
    """GPT2Model: wte, wpe, h, ln_f."""

    def __init__(self, c):
        super().__init__()
        C, V, eps = c["n_embd"], c["vocab_size"], c["layer_norm_epsilon"]
        I = c.get("n_inner") or 4 * C
        self.nh = c["n_head"]
        self.act = activation(c, "activation_function")
        h = nn.ModuleList()
        for _ in range(c["n_layer"]):
            h.append(ns(ln_1=nn.LayerNorm(C, eps=eps), attn=ns(c_attn=Conv1D(C, 3 * C), c_proj=Conv1D(C, C)),
                        ln_2=nn.LayerNorm(C, eps=eps), mlp=ns(c_fc=Conv1D(C, I), c_proj=Conv1D(I, C))))
        self.wte, self.wpe, self.h, self.ln_f = nn.Embedding(V, C), nn.Embedding(c["n_positions"], C), h, nn.LayerNorm(
            C, eps=eps)

    def forward(self, ids):
        B, T = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(T))[None]
        causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
        for blk in self.h:
            q, k, v = blk.attn.c_attn(blk.ln_1(x)).split(x.shape[-1], dim=-1)
            heads = lambda z: z.view(B, T, self.nh, -1).transpose(1, 2)  # noqa: E731
            q, k, v = heads(q), heads(k), heads(v)
            s = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).masked_fill(~causal, float("-inf"))
            a = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, -1)
            x = x + blk.attn.c_proj(a)
            x = x + blk.mlp.c_proj(self.act(blk.mlp.c_fc(blk.ln_2(x))))
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    tied = ["lm_head.weight"]

    def __init__(self, c):
        super().__init__()
        self.transformer = GPT2(c)
        self.lm_head = nn.Linear(c["n_embd"], c["vocab_size"], bias=False)

    def tie(self):
        self.lm_head.weight = self.transformer.wte.weight

    def forward(self, ids):  # (T) -> (T, V)
        return self.lm_head(self.transformer(ids[None]))[0]

    def describe(self, out):
        return f"LM logits of {out.shape[0]} tokens"


class GPT2ForSequenceClassification(nn.Module):
    tied = []

    def __init__(self, c):
        super().__init__()
        self.num_labels = num_labels(c)
        check_problem_type(c, self.num_labels)
        self.pad = c.get("pad_token_id")
        self.transformer = GPT2(c)
        self.score = nn.Linear(c["n_embd"], self.num_labels, bias=False)

    def forward(self, ids):  # (T) -> (num_labels)
        ids = ids[None]
        logits = self.score(self.transformer(ids))
        if self.pad is None:
            last = torch.full((1,), -1)
        else:  # transformers >= 4.48: the rightmost token that is not pad_token_id (argmax 0 if none)
            non_pad = (ids != self.pad).int()
            last = (torch.arange(ids.shape[-1], dtype=torch.int32) * non_pad).argmax(-1)
        self.pooled_at = int(last[0]) % ids.shape[-1]
        return logits[torch.arange(1), last][0]

    def describe(self, out):
        return (f"{self.num_labels} class logits at token {self.pooled_at} "
                f"(pad_token_id {self.pad})")


CLASSES = {k.__name__: k for k in (BertForMaskedLM, GPT2LMHeadModel, BertForSequenceClassification,
                                   BertForMultipleChoice, BertForQuestionAnswering, GPT2ForSequenceClassification)}


def check(ckpt, inspect_file):
    config = json.load(open(f"{ckpt}/config.json"))
    if config.get("saobp_attention", "original") != "original":
        raise CheckFailed(f"attention '{config['saobp_attention']}' has no Hugging Face counterpart; "
                          "check an 'original' checkpoint")
    if config.get("saobp_positions", "learned") != "learned":
        raise CheckFailed(f"positions '{config['saobp_positions']}': Hugging Face's models use learned positions")
    archs = config.get("architectures") or []
    if len(archs) != 1 or archs[0] not in CLASSES:
        raise CheckFailed(f"config.json architectures {archs}: expected one of {sorted(CLASSES)}")
    arch = archs[0]
    model = CLASSES[arch](config)
    weights = read_tensors(f"{ckpt}/model.safetensors")
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    bad = [f"{k}: {tuple(v.shape)} vs {shapes[k]}" for k, v in weights.items() if k in shapes and tuple(v.shape) != shapes[k]]
    if bad:
        raise CheckFailed("shape mismatch (saobp vs HF): " + "; ".join(bad))
    result = model.load_state_dict(weights, strict=False)
    missing = sorted(set(result.missing_keys) - set(model.tied))
    if missing or result.unexpected_keys:
        raise CheckFailed(f"layout mismatch: missing {missing}, unexpected {result.unexpected_keys}")
    if hasattr(model, "tie"):
        model.tie()
    model.eval()
    got = read_tensors(inspect_file)
    ids = got["ids"].long()
    with torch.no_grad():
        out = model(ids).double()
    ours = got["logits"].double()
    if tuple(out.shape) != tuple(ours.shape):
        raise CheckFailed(f"{arch}: output shape {tuple(out.shape)} but saobp inspect wrote {tuple(ours.shape)}")
    err = (out - ours).abs().max().item()
    scale = ours.abs().max().item()
    tied = f"tied: {', '.join(model.tied)}" if model.tied else "nothing tied"
    print(f"{arch} ({config.get('saobp_task', 'pretrained')}): {len(weights)} tensors loaded by name with HF's layout "
          f"({tied}); {model.describe(out)} for {ids.shape[0]} input tokens: max |torch - saobp| = {err:.3g} "
          f"(max |saobp| {scale:.3g})")
    if not err <= 1e-4 * max(1.0, scale):
        raise CheckFailed(f"{arch}: outputs differ\n  torch {out.flatten()[:8].tolist()}\n  saobp {ours.flatten()[:8].tolist()}")


def main():
    args = sys.argv[1:]
    if not args or len(args) % 2:
        sys.exit(__doc__)
    failed = 0
    for ckpt, inspect_file in zip(args[::2], args[1::2]):
        try:
            check(ckpt, inspect_file)
        except CheckFailed as e:
            print(f"FAILED {ckpt}: {e}", file=sys.stderr)
            failed += 1
    if failed:
        sys.exit(f"{failed} of {len(args) // 2} checkpoints do not match Hugging Face's layout")


if __name__ == "__main__":
    main()
