#!/usr/bin/python3
"""Turns a saobp checkpoint folder into a folder laid out as Hugging Face publishes models.

  tools/make_hf_folder.py CHECKPOINT_DIR OUT_DIR [--layout LAYOUT] [--legacy-layernorm]
                          [--dtype f32|f16|bf16] [--attn-bias]

LAYOUT (default: BertModel for a bert checkpoint, GPT2Model for gpt2):
  BertModel            names without "bert.", no cls.* head (as bert-base-uncased's encoder)
  BertForMaskedLM      our names, with cls.predictions.*
  BertForPreTraining   our names plus a zero next-sentence head cls.seq_relationship.*
  GPT2Model            names without "transformer." (as the original gpt2 folder)
  GPT2LMHeadModel      our names, plus lm_head.weight (a copy of the tied wte)

--legacy-layernorm writes BERT's LayerNorm weight/bias as gamma/beta (old TF-converted folders);
--attn-bias adds GPT-2's causal-mask buffers h.{i}.attn.bias (1, 1, n_positions, n_positions)
and h.{i}.attn.masked_bias, as older gpt2 folders hold; --dtype f16/bf16 stores the weights in
half precision (round to nearest even). config.json keeps only Hugging Face's keys (the
bert-base-uncased / gpt2 key sets): no saobp_* fields, so the folder means softmax attention
with learned positions; a checkpoint trained otherwise is refused. The tokenizer files are
copied. The folder is what `saobp train --init OUT_DIR` reads (src/train/pretrained.h).

Needs only numpy (safetensors is read and written by hand; the reader, tools/safetensors_io.py, is
shared with tools/check_hf_layout.py).
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

sys.dont_write_bytecode = True  # no tools/__pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_safetensors  # noqa: E402  (tools/safetensors_io.py)

TOKENIZER_FILES = ["vocab.txt", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json"]
BERT_KEYS = ["architectures", "attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size",
             "initializer_range", "intermediate_size", "layer_norm_eps", "max_position_embeddings", "model_type",
             "num_attention_heads", "num_hidden_layers", "pad_token_id", "type_vocab_size", "vocab_size"]
GPT2_KEYS = ["activation_function", "architectures", "attn_pdrop", "bos_token_id", "embd_pdrop", "eos_token_id",
             "initializer_range", "layer_norm_epsilon", "model_type", "n_ctx", "n_embd", "n_head", "n_inner",
             "n_layer", "n_positions", "resid_pdrop", "vocab_size"]


def to_half(a, dtype):
    """(name in the format, little-endian bytes) of a float array in f32, f16 or bf16."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    if dtype == "f32":
        return "F32", a.astype("<f4").tobytes()
    if dtype == "f16":
        return "F16", a.astype("<f2").tobytes()
    u = a.view(np.uint32).astype(np.uint64)  # bf16: round to nearest even on the top 16 bits
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r = np.where(np.isnan(a), np.uint16(0x7FC0), r)
    return "BF16", r.astype("<u2").tobytes()


def write_safetensors(path, tensors, dtype):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        kind, raw = to_half(a, dtype) if a.dtype.kind == "f" else ("I32", a.astype("<i4").tobytes())
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def legacy(name):
    if ".LayerNorm." not in name and not name.startswith("LayerNorm."):
        return name
    if name.endswith(".weight"):
        return name[: -len(".weight")] + ".gamma"
    if name.endswith(".bias"):
        return name[: -len(".bias")] + ".beta"
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("out")
    ap.add_argument("--layout", choices=["BertModel", "BertForMaskedLM", "BertForPreTraining", "GPT2Model",
                                         "GPT2LMHeadModel"])
    ap.add_argument("--legacy-layernorm", action="store_true")
    ap.add_argument("--dtype", choices=["f32", "f16", "bf16"], default="f32")
    ap.add_argument("--attn-bias", action="store_true")
    args = ap.parse_args()

    with open(os.path.join(args.checkpoint, "config.json")) as f:
        cfg = json.load(f)
    family = cfg.get("model_type")
    if family not in ("bert", "gpt2"):
        sys.exit(f"{args.checkpoint}/config.json: model_type {family!r}; expected bert or gpt2")
    for key, want in (("saobp_attention", "original"), ("saobp_positions", "learned")):
        if cfg.get(key, want) != want:
            sys.exit(f"{args.checkpoint}/config.json: {key} is {cfg[key]!r}; a Hugging Face folder means "
                     f"{key[6:]} = {want!r} (train with model.{key[6:]}={want})")
    layout = args.layout or ("BertModel" if family == "bert" else "GPT2Model")
    if (family == "bert") != layout.startswith("Bert"):
        sys.exit(f"--layout {layout} does not fit a {family} checkpoint")
    if args.legacy_layernorm and family != "bert":
        sys.exit("--legacy-layernorm is for BERT folders")
    if args.attn_bias and family != "gpt2":
        sys.exit("--attn-bias is for GPT-2 folders")

    src = read_safetensors(os.path.join(args.checkpoint, "model.safetensors"))
    out = {}
    for name, a in src.items():
        if name.endswith("saobp_lambda_rho"):
            continue  # only BP attention has it, and that was refused above
        if layout == "BertModel":
            if name.startswith("cls."):
                continue
            name = name[len("bert."):]
        elif layout == "GPT2Model":
            name = name[len("transformer."):]
        out[legacy(name) if args.legacy_layernorm else name] = a
    C = cfg.get("hidden_size", cfg.get("n_embd"))
    if layout == "BertForPreTraining":
        out["cls.seq_relationship.weight"] = np.zeros((2, C), np.float32)
        out["cls.seq_relationship.bias"] = np.zeros((2,), np.float32)
    if layout == "GPT2LMHeadModel":
        out["lm_head.weight"] = src["transformer.wte.weight"]
    if args.attn_bias:
        P = cfg["n_positions"]
        prefix = "h." if layout == "GPT2Model" else "transformer.h."
        for i in range(cfg["n_layer"]):
            out[f"{prefix}{i}.attn.bias"] = np.tril(np.ones((P, P), np.float32))[None, None]
            out[f"{prefix}{i}.attn.masked_bias"] = np.array(-1e4, np.float32)

    hf = dict(cfg)
    hf["architectures"] = [layout]
    if family == "gpt2":
        hf["n_ctx"] = hf["n_positions"]
        if hf.get("n_inner") == 4 * hf["n_embd"]:
            hf.pop("n_inner")  # as the original gpt2 config: absent means 4 * n_embd
    keys = BERT_KEYS if family == "bert" else GPT2_KEYS
    hf = {k: hf[k] for k in keys if k in hf}

    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), out, args.dtype)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(hf, f, indent=2, sort_keys=True)
        f.write("\n")
    copied = [t for t in TOKENIZER_FILES if os.path.exists(os.path.join(args.checkpoint, t))]
    for t in copied:
        shutil.copyfile(os.path.join(args.checkpoint, t), os.path.join(args.out, t))
    print(f"{args.out}: {layout}, {len(out)} tensors ({args.dtype}), config.json with {len(hf)} keys, "
          f"tokenizer files: {', '.join(copied) or 'none'}")


if __name__ == "__main__":
    main()
