#!/usr/bin/env python3
"""Checks saobp's checkpoints against the real Hugging Face `transformers` library, both ways.

  tools/check_hf_transformers.py [--saobp build/saobp] [--device cpu|cuda] [--json FILE]
                                 [--keep DIR] [--only SUBSTRING] [--tolerance 1e-4]

Needs python3 with torch and transformers (written for transformers 5; nothing is downloaded:
HF_HUB_OFFLINE=1 and TRANSFORMERS_OFFLINE=1 are set here, and every model is a local folder). It
makes every run it needs in a temporary folder (--keep DIR: in DIR, kept), and runs two kinds of
checks, each on its own (a failing one, or a failing saobp command, does not stop the others):

saobp -> transformers (`original` attention; the folders `saobp train` and `saobp finetune` write):
  saobp/bert-mlm         `saobp train` (configs/quickstart.toml, model.family=bert, a 400-token
                         vocabulary trained on the fixtures' texts, 10 steps) -> BertForMaskedLM
  saobp/gpt2-lm          the same with model.family=gpt2 -> GPT2LMHeadModel
  saobp/bert-sst2        `saobp finetune --init` that BERT on tests/fixtures/glue (glue/sst2, one
                         epoch) -> BertForSequenceClassification (2 class logits)
  saobp/bert-stsb        glue/stsb -> BertForSequenceClassification (regression: 1 score)
  saobp/bert-race        race/all -> BertForMultipleChoice (the row's score)
  saobp/bert-squad       squad/v1.1 -> BertForQuestionAnswering (start and end logits)
  saobp/gpt2-rte         glue/rte on the GPT-2 -> GPT2ForSequenceClassification
transformers -> saobp (randomly initialized models written by transformers' save_pretrained:
hidden 64, 2 layers, 4 heads, every parameter drawn at random, biases and LayerNorms included;
the tokenizer files come from `saobp vocab` on the fixtures' texts, as a folder needs them):
  hf/bert-train-init     BertForMaskedLM folder -> `saobp train --init FOLDER` (the model keys
                         taken from its config.json, data.kind=synthetic, one step at
                         train.lr=1e-30: the weights stay the folder's) -> its MLM logits
  hf/gpt2-train-init     GPT2LMHeadModel folder -> the same -> its LM logits
  hf/bert-finetune-sst2  `saobp finetune --init FOLDER` (glue/sst2) -> BertForSequenceClassification
  hf/gpt2-finetune-rte   `saobp finetune --init FOLDER` (glue/rte) -> GPT2ForSequenceClassification

Each check runs `saobp inspect` on the folder saobp wrote (the pretrained ones with --ids, the
fine-tuned ones with --sample 0: the first dev example), loads a folder with the transformers
class its config.json names (`from_pretrained(folder, local_files_only=True,
attn_implementation="eager", dtype=torch.float32, output_loading_info=True)`), runs the same ids
(attention mask all ones, BERT token types all 0, as inspect runs them; multiple choice as one
example with one choice) in eval mode under no_grad, and compares the output with inspect's
"logits": PASS when max |saobp - transformers| <= tolerance x max |saobp| + 1e-6 (f32 on both
sides; tolerance 1e-4; the 1e-6 floor is for outputs near 0). A key that from_pretrained reports
missing or unexpected is a FAIL, except buffers (position_ids, token_type_ids, GPT-2's attn.bias /
attn.masked_bias) and tied weights (cls.predictions.decoder.*, lm_head.weight) whose tie is
checked to hold. For the hf/* train
checks the reference is the folder transformers wrote, reloaded with from_pretrained; saobp's
init_report.json must say every tensor was loaded (none initialized), and the weights saobp saved
are compared with the folder's by name (reported). The hidden states (inspect's hidden.{i}
against output_hidden_states; GPT-2's last one is ln_f's output on both sides) are reported, not
judged.

One line per check: "PASS name: ..." or "FAIL name: ..." (a failed saobp command is printed with
its command line and the end of its stderr and stdout); the exit status is 1 when any check
failed. --json FILE writes a summary: versions, device, tolerance, and per check its status,
seconds, max abs difference, relative error (max abs difference / max |saobp|), shapes and notes.
--device cuda runs saobp's train and finetune with train.device=cuda (inspect runs where the
checkpoint's config says) and transformers on torch's cuda device (cpu when torch has none).
About 40 s on the 2-core CPU machine (--device cpu; measured with a stand-in for transformers).
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

# Nothing may be downloaded: set before transformers (or huggingface_hub) is imported.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.dont_write_bytecode = True  # no tools/__pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_safetensors  # noqa: E402  (tools/safetensors_io.py, numpy only)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
QUICKSTART = os.path.join(ROOT, "configs", "quickstart.toml")

LM_IDS = [2, 7, 9, 11, 4, 13, 3, 21, 17, 5, 30, 8]  # the pretrained checks' input (ids < 400)
TOKENIZER_FILES = ["vocab.txt", "vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json"]
# Keys from_pretrained may report without the model being wrong: buffers, not weights.
BUFFER_KEYS = [r"(^|\.)position_ids$", r"(^|\.)token_type_ids$", r"\.attn\.bias$", r"\.attn\.masked_bias$"]
# Tied weights: absent from the files on purpose; allowed when the tie holds in the loaded model.
TIED_KEYS = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias", "lm_head.weight"}
HF_SIZES = {"hidden": 64, "layers": 2, "heads": 4, "bert_intermediate": 128, "positions": 64}


class CheckFailed(Exception):
    pass


def tail(text, lines=30):
    rows = (text or "").rstrip("\n").split("\n")
    cut = rows[-lines:]
    return ("    ... (%d lines above)\n" % (len(rows) - len(cut)) if len(rows) > len(cut) else "") + "\n".join(
        "    " + r for r in cut)


def is_buffer(key):
    return any(re.search(p, key) for p in BUFFER_KEYS)


class Context:
    """The options, the work folder, the saobp runner and the shared steps (each done once)."""

    def __init__(self, args, work):
        self.args = args
        self.saobp = args.saobp
        self.device = args.device
        self.work = work
        self.tol = args.tolerance
        self.logs = os.path.join(work, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.n_commands = 0
        self._done = {}  # step name -> ("ok", value) | ("failed", message, the check that ran it)
        self.current = None  # the check running now
        self._torch = self._tf = None

    # ---- saobp -------------------------------------------------------------------------------
    def run_saobp(self, name, argv, timeout=1800):
        """Runs saobp with argv; its output goes to logs/NN-name.log. Raises CheckFailed with the
        command line and the end of stderr and stdout when it fails."""
        self.n_commands += 1
        cmd = [self.saobp] + [str(a) for a in argv]
        log = os.path.join(self.logs, "%02d-%s.log" % (self.n_commands, re.sub(r"[^A-Za-z0-9_.-]", "_", name)))
        t0 = time.time()
        try:
            p = subprocess.run(cmd, cwd=self.work, capture_output=True, text=True, errors="replace",
                               timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout after %d s" % timeout, e.stdout or "", e.stderr or ""
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
            err = err.decode(errors="replace") if isinstance(err, bytes) else err
        except OSError as e:
            raise CheckFailed("cannot run %s: %s" % (shlex.join(cmd), e))
        with open(log, "w") as f:
            f.write("$ %s\n# exit %s, %.1f s\n--- stdout\n%s\n--- stderr\n%s\n" % (
                shlex.join(cmd), rc, time.time() - t0, out, err))
        if rc != 0:
            raise CheckFailed("saobp failed (exit %s):\n  $ %s\n  stderr:\n%s\n  stdout:\n%s\n  log: %s%s" % (
                rc, shlex.join(cmd), tail(err), tail(out, 15), log,
                "" if self.args.keep else " (removed at the end: --keep DIR keeps it)"))
        return out

    def device_overrides(self):
        return ["train.device=%s" % self.device]

    def once(self, step, fn):
        """fn() the first time `step` is asked for; its value (or its failure) afterwards."""
        if step not in self._done:
            try:
                self._done[step] = ("ok", fn())
            except CheckFailed as e:
                self._done[step] = ("failed", str(e), self.current)
                raise
            except Exception as e:  # noqa: BLE001  (reported as the check's failure)
                self._done[step] = ("failed", "%s: %s" % (type(e).__name__, e), self.current)
                raise
        done = self._done[step]
        if done[0] == "failed":
            first = done[1].split("\n")
            raise CheckFailed("needs %s, which failed in %s above: %s" % (
                step, done[2], first[0] + (" " + first[1].strip() if len(first) > 1 else "")))
        return done[1]

    # ---- torch and transformers, imported when a check first needs them ---------------------
    def torch(self):
        if self._torch is None:
            try:
                import torch
            except ImportError as e:
                raise CheckFailed("torch is not importable: %s" % e)
            try:  # f32 matmuls in f32, no TF32 (torch's default; saobp's cuBLAS runs pedantic math)
                torch.set_float32_matmul_precision("highest")
            except Exception:  # noqa: BLE001  (an API change must not fail the checks)
                pass
            self._torch = torch
        return self._torch

    def transformers(self):
        if self._tf is None:
            self.torch()
            try:
                import transformers
            except ImportError as e:
                raise CheckFailed("transformers is not importable (%s); this check needs the real library" % e)
            self._tf = transformers
        return self._tf

    def hf_device(self):
        torch = self.torch()
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            return "cpu"
        return self.device

    # ---- shared steps ----------------------------------------------------------------------
    def corpus(self):
        """The fixtures' texts, every non-blank line a document of its own (as check_hf_layout.sh)."""
        def make():
            files = []
            for sub in ["glue/SST-2", "glue/STS-B", "glue/RTE", "race/RACE", "squad/dev-v1.1.json"]:
                path = os.path.join(FIXTURES, sub)
                if os.path.isfile(path):
                    files.append(path)
                for d, _, names in os.walk(path):
                    files += [os.path.join(d, n) for n in names]
            if not files:
                raise CheckFailed("no fixture files under %s" % FIXTURES)
            out = os.path.join(self.work, "corpus.txt")
            with open(out, "w", encoding="utf-8") as w:
                for path in sorted(files, key=lambda p: p.encode()):
                    with open(path, encoding="utf-8", errors="replace") as f:
                        for line in f.read().split("\n"):
                            if line.split():
                                w.write(line + "\n\n")
            return out
        return self.once("the fixture corpus", make)

    def pretrained(self, family):
        """saobp train: a tiny `original` model of `family` on the corpus; its final folder."""
        def make():
            run_dir = os.path.join(self.work, "saobp-%s" % family)
            self.run_saobp("train-%s" % family, [
                "train", QUICKSTART, "model.family=%s" % family, "model.attention=original",
                "model.positions=learned", "data.kind=text", "data.path=%s" % self.corpus(),
                "data.valid_fraction=0.2", "model.vocab_size=400", "data.vocab_size=400", "model.max_positions=64",
                "train.seq_len=32", "train.batch_size=8", "train.max_steps=10", "train.warmup_steps=2",
                "train.eval_every=0", "train.log_every=0", "train.threads=2",
                "train.run_dir=%s" % run_dir] + self.device_overrides() + ["--quiet"])
            return os.path.join(run_dir, "final")
        return self.once("saobp train (%s)" % family, make)

    def squad_dir(self):
        def make():
            d = os.path.join(self.work, "squad")  # squad/v1.1 reads DIR/train-v1.1.json and DIR/dev-v1.1.json
            os.makedirs(d, exist_ok=True)
            src = os.path.join(FIXTURES, "squad", "dev-v1.1.json")
            shutil.copyfile(src, os.path.join(d, "train-v1.1.json"))
            shutil.copyfile(src, os.path.join(d, "dev-v1.1.json"))
            return d
        return self.once("the SQuAD folder", make)

    def finetune(self, name, init, task, data, extra=()):
        """saobp finetune --init INIT: one epoch on a fixture; the final folder."""
        def make():
            run_dir = os.path.join(self.work, name)
            self.run_saobp("finetune-%s" % name, [
                "finetune", "--init", init, "--task", task, "--data", data, "train.epochs=1",
                "train.batch_size=2", "train.seq_len=48", "train.threads=2", "train.log_every=0",
                "train.run_dir=%s" % run_dir] + list(extra) + self.device_overrides() + ["--quiet"])
            return os.path.join(run_dir, "final")
        return self.once("saobp finetune (%s)" % name, make)

    def inspect(self, name, checkpoint, ids=None):
        """saobp inspect on `checkpoint` (--ids, or --sample 0): the tensors of its file."""
        out = os.path.join(self.work, "%s.inspect.safetensors" % name)
        what = ["--ids", ",".join(str(i) for i in ids)] if ids is not None else ["--sample", "0"]
        self.run_saobp("inspect-%s" % name, ["inspect", "--checkpoint", checkpoint] + what + ["--out", out])
        return read_tensors(out)

    def vocab(self, kind):
        """saobp vocab: a WordPiece (bert) or byte-level BPE (gpt2) vocabulary of the corpus."""
        def make():
            out = os.path.join(self.work, "vocab-%s" % kind)
            self.run_saobp("vocab-%s" % kind, ["vocab", "--kind", kind, "--size", "400", self.corpus(), "--out", out])
            return out
        return self.once("saobp vocab (%s)" % kind, make)

    def hf_folder(self, family):
        """A randomly initialized BertForMaskedLM / GPT2LMHeadModel written by save_pretrained."""
        def make():
            tf, torch = self.transformers(), self.torch()
            vocab_dir = self.vocab("wordpiece" if family == "bert" else "bpe")
            V, special = tokenizer_info(vocab_dir)
            s = HF_SIZES
            if family == "bert":
                config = tf.BertConfig(vocab_size=V, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                                       num_attention_heads=s["heads"], intermediate_size=s["bert_intermediate"],
                                       max_position_embeddings=s["positions"], type_vocab_size=2,
                                       pad_token_id=special.get("[PAD]", 0))
                model = tf.BertForMaskedLM(config)
            else:
                eot = special.get("<|endoftext|>")
                config = tf.GPT2Config(vocab_size=V, n_positions=s["positions"], n_embd=s["hidden"],
                                       n_layer=s["layers"], n_head=s["heads"], bos_token_id=eot, eos_token_id=eot)
                model = tf.GPT2LMHeadModel(config)
            gen = torch.Generator().manual_seed(20240622 + (family == "gpt2"))
            with torch.no_grad():  # every parameter at random: a zero bias would hide a misplaced one
                for pname, p in model.named_parameters():
                    noise = torch.randn(tuple(p.shape), generator=gen, dtype=torch.float32)
                    ln_weight = p.dim() == 1 and pname.endswith("weight")  # only LayerNorms have 1-D weights
                    p.copy_((1 + 0.1 * noise) if ln_weight else 0.1 * noise)
            folder = os.path.join(self.work, "hf-%s" % family)
            model.save_pretrained(folder)
            if not os.path.exists(os.path.join(folder, "model.safetensors")):
                raise CheckFailed("save_pretrained(%s) wrote no model.safetensors: %s" % (
                    folder, sorted(os.listdir(folder))))
            for t in TOKENIZER_FILES:
                if os.path.exists(os.path.join(vocab_dir, t)):
                    shutil.copyfile(os.path.join(vocab_dir, t), os.path.join(folder, t))
            return folder
        return self.once("the transformers %s folder" % family, make)

    # ---- the transformers side -------------------------------------------------------------
    def hf_forward(self, folder, ids):
        """Loads `folder` with the class its config.json names and runs `ids`: (output, hidden
        states, notes), the output laid out as saobp inspect's "logits"."""
        tf, torch = self.transformers(), self.torch()
        with open(os.path.join(folder, "config.json")) as f:
            config = json.load(f)
        archs = config.get("architectures") or []
        if len(archs) != 1:
            raise CheckFailed("%s/config.json: architectures %r; expected one class name" % (folder, archs))
        arch = archs[0]
        cls = getattr(tf, arch, None)
        if cls is None:
            raise CheckFailed("%s/config.json names %r, which transformers %s does not have" % (
                folder, arch, tf.__version__))
        if config.get("saobp_attention", "original") != "original":
            raise CheckFailed("%s: saobp_attention %r has no transformers counterpart" % (
                folder, config["saobp_attention"]))
        try:
            model, info = cls.from_pretrained(folder, local_files_only=True, attn_implementation="eager",
                                              dtype=torch.float32, output_loading_info=True)
        except Exception as e:  # noqa: BLE001
            raise CheckFailed("%s.from_pretrained(%s) raised %s: %s" % (arch, folder, type(e).__name__, e))
        notes = []
        if next(model.parameters()).dtype != torch.float32:
            notes.append("loaded as %s, cast to float32" % next(model.parameters()).dtype)
            model = model.float()
        model.to(self.hf_device()).eval()

        def keys(k):
            v = info.get(k) if isinstance(info, dict) else getattr(info, k, None)
            return sorted(str(x) for x in (v or []))
        missing, unexpected = keys("missing_keys"), keys("unexpected_keys")
        mismatched, errors = keys("mismatched_keys"), keys("error_msgs")
        ties = tie_status(model, torch)
        bad_missing = [k for k in missing if not is_buffer(k) and not (k in TIED_KEYS and ties.get(k))]
        bad_unexpected = [k for k in unexpected if not is_buffer(k)]
        problems = []
        if bad_missing:
            problems.append("missing keys (left at random by transformers): %s" % bad_missing)
        if bad_unexpected:
            problems.append("unexpected keys (in the file, not in %s): %s" % (arch, bad_unexpected))
        if mismatched:
            problems.append("mismatched shapes: %s" % mismatched)
        if errors:
            problems.append("load errors: %s" % errors)
        broken = [k for k, ok in ties.items() if not ok]
        if broken:
            problems.append("tied weights that do not hold after loading: %s" % broken)
        if problems:
            raise CheckFailed("%s.from_pretrained(%s): %s" % (arch, folder, "; ".join(problems)))
        if missing:
            notes.append("missing as expected: %s" % ", ".join(missing))

        dev = self.hf_device()
        x = torch.tensor([list(int(i) for i in ids)], dtype=torch.long, device=dev)
        kw = {"attention_mask": torch.ones_like(x)}
        if arch.startswith("Bert"):
            kw["token_type_ids"] = torch.zeros_like(x)
        else:
            kw["use_cache"] = False  # GPT-2: no token_type_ids (they would add wte rows)
        if arch == "BertForMultipleChoice":  # one example with one choice: (1, 1, T)
            x = x[:, None, :]
            kw = {k: v[:, None, :] for k, v in kw.items()}
        with torch.no_grad():
            try:
                out = model(input_ids=x, output_hidden_states=True, return_dict=True, **kw)
            except TypeError as e:  # an API change in the optional arguments: the plain call
                notes.append("called without output_hidden_states / return_dict (%s)" % e)
                out = model(input_ids=x, **{k: v for k, v in kw.items() if k != "use_cache"})
        if isinstance(out, tuple):  # return_dict not honoured: (logits, ...) / (start, end, ...)
            out = (dict(start_logits=out[0], end_logits=out[1]) if arch == "BertForQuestionAnswering"
                   else dict(logits=out[0]))
            out = type("Output", (), dict(out, hidden_states=None))
        if arch == "BertForQuestionAnswering":
            y = torch.stack([out.start_logits[0], out.end_logits[0]], -1)  # (T, 2)
        else:
            y = out.logits[0]  # (T, V) | (K) | (num_choices = 1)
        hidden = [h[0].double().cpu().numpy() for h in (getattr(out, "hidden_states", None) or [])]
        return arch, y.double().cpu().numpy(), hidden, notes


def tie_status(model, torch):
    """{tied key: whether the tie holds} for the tied keys this model has."""
    out = {}
    emb_in, emb_out = model.get_input_embeddings(), model.get_output_embeddings()
    if emb_out is not None and emb_in is not None:
        same = emb_out.weight is emb_in.weight or (
            emb_out.weight.shape == emb_in.weight.shape and torch.equal(emb_out.weight, emb_in.weight))
        name = "lm_head.weight" if hasattr(model, "lm_head") else "cls.predictions.decoder.weight"
        out[name] = bool(same)
    preds = getattr(getattr(model, "cls", None), "predictions", None)
    decoder = getattr(preds, "decoder", None)
    if getattr(decoder, "bias", None) is not None and getattr(preds, "bias", None) is not None:
        b = decoder.bias
        out["cls.predictions.decoder.bias"] = bool(b is preds.bias or (b.shape == preds.bias.shape and
                                                                      torch.equal(b, preds.bias)))
    return out


def read_tensors(path):
    """A safetensors file's tensors as numpy arrays by name (tools/safetensors_io.py)."""
    try:
        return read_safetensors(path)
    except SystemExit as e:  # the reader exits on a dtype it does not read
        raise CheckFailed(str(e))
    except (OSError, ValueError) as e:
        raise CheckFailed("cannot read %s: %s" % (path, e))


def tokenizer_info(vocab_dir):
    """(vocabulary size, {special token: id}) of the files `saobp vocab` wrote."""
    ids = {}
    txt, js = os.path.join(vocab_dir, "vocab.txt"), os.path.join(vocab_dir, "vocab.json")
    if os.path.exists(txt):
        with open(txt, encoding="utf-8") as f:
            rows = f.read().split("\n")
        if rows and rows[-1] == "":
            rows.pop()
        ids = {t: i for i, t in enumerate(rows)}
    elif os.path.exists(js):
        with open(js, encoding="utf-8") as f:
            ids = json.load(f)
    else:
        raise CheckFailed("%s: no vocab.txt or vocab.json" % vocab_dir)
    tj = os.path.join(vocab_dir, "tokenizer.json")
    if os.path.exists(tj):
        with open(tj, encoding="utf-8") as f:
            for t in json.load(f).get("added_tokens") or []:
                ids.setdefault(t["content"], t["id"])
    if not ids:
        raise CheckFailed("%s: an empty vocabulary" % vocab_dir)
    V = max(ids.values()) + 1
    return V, {t: i for t, i in ids.items() if re.fullmatch(r"\[[A-Z]+\]|<\|[a-z]+\|>", t)}


ABS_FLOOR = 1e-6  # the smallest difference that fails: f32 rounding of outputs near 0


def bound(tol, scale):
    """The largest max |saobp - transformers| that passes, for outputs up to `scale` in size."""
    return tol * scale + ABS_FLOOR


def compare(ours, theirs, tol):
    """(passed, max abs difference, relative error, max |ours|) of two arrays of one shape."""
    import numpy as np
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if a.shape != b.shape:
        raise CheckFailed("shapes differ: saobp inspect %s, transformers %s" % (a.shape, b.shape))
    if not np.all(np.isfinite(a)) or not np.all(np.isfinite(b)):
        raise CheckFailed("non-finite values: saobp %d, transformers %d" % (
            np.sum(~np.isfinite(a)), np.sum(~np.isfinite(b))))
    diff = float(np.max(np.abs(a - b))) if a.size else 0.0
    scale = float(np.max(np.abs(a))) if a.size else 0.0
    return diff <= bound(tol, scale), diff, diff / scale if scale > 0 else diff, scale


def hidden_report(saobp_tensors, hf_hidden, tol):
    """Max abs difference of each hidden state (informational): saobp's hidden.{i} against
    transformers' hidden_states. GPT-2: saobp has one more (block outputs, then ln_f's); HF's
    last one is ln_f's, so it is paired with saobp's last."""
    import numpy as np
    ours = []
    while "hidden.%d" % len(ours) in saobp_tensors:
        ours.append(saobp_tensors["hidden.%d" % len(ours)])
    if not ours or not hf_hidden:
        return None, None
    pairs = list(zip(ours, hf_hidden))
    if len(ours) == len(hf_hidden) + 1:
        pairs = list(zip(ours[:len(hf_hidden) - 1], hf_hidden[:-1])) + [(ours[-1], hf_hidden[-1])]
    elif len(ours) != len(hf_hidden):
        return None, "hidden states: saobp %d, transformers %d: not compared" % (len(ours), len(hf_hidden))
    diffs = []
    for a, b in pairs:
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        diffs.append(float(np.max(np.abs(a - b))) if a.shape == b.shape else None)
    over = [i for i, (d, (a, _)) in enumerate(zip(diffs, pairs))
            if d is None or d > bound(tol, float(np.max(np.abs(a))))]
    note = None
    if over:
        note = "hidden states over the tolerance (or of another shape) at %s (max |diff| %s)" % (
            over, ["%.3g" % d if d is not None else "shape" for d in diffs])
    return diffs, note


# ---- the checks -------------------------------------------------------------------------------

def judge(ctx, result, tensors, folder, ids=None):
    """Runs transformers on `folder` with inspect's ids and compares with inspect's logits."""
    ids = [int(i) for i in (tensors["ids"] if ids is None else ids)]
    arch, theirs, hidden, notes = ctx.hf_forward(folder, ids)
    ours = tensors["logits"]
    ok, diff, rel, scale = compare(ours, theirs, ctx.tol)
    hdiffs, hnote = hidden_report(tensors, hidden, ctx.tol)
    result.update({"class": arch, "tokens": len(ids), "shape": list(theirs.shape), "max_abs_diff": diff,
                   "rel_err": rel, "max_abs_saobp": scale, "hidden_max_abs_diff": hdiffs})
    if hnote:
        notes.append(hnote)
    result["notes"] = notes
    summary = "%s, %d tokens, output %s: max |saobp - transformers| %.3g, relative %.3g (max |saobp| %.3g)" % (
        arch, len(ids), tuple(theirs.shape), diff, rel, scale)
    if not ok:
        import numpy as np
        a, b = np.asarray(ours, np.float64), np.asarray(theirs, np.float64)
        at = np.unravel_index(int(np.argmax(np.abs(a - b))), a.shape)
        raise CheckFailed("%s; over the bound %g x max |saobp| + %g = %.3g; the largest difference at %s: "
                          "saobp %.6g, transformers %.6g\n  saobp        %s\n  transformers %s" % (
                              summary, ctx.tol, ABS_FLOOR, bound(ctx.tol, scale), tuple(int(i) for i in at),
                              a[at], b[at], a.flatten()[:6].tolist(), b.flatten()[:6].tolist()))
    return summary


def check_saobp_lm(family):
    def run(ctx, result):
        final = ctx.pretrained(family)
        return judge(ctx, result, ctx.inspect("saobp-%s-lm" % family, final, LM_IDS), final)
    return run


def check_saobp_finetune(name, family, task, data, extra=()):
    def run(ctx, result):
        d = data(ctx) if callable(data) else data
        final = ctx.finetune(name, ctx.pretrained(family), task, d, extra)
        return judge(ctx, result, ctx.inspect(name, final), final)
    return run


def check_hf_train_init(family):
    def run(ctx, result):
        folder = ctx.hf_folder(family)
        with open(os.path.join(folder, "config.json")) as f:
            c = json.load(f)
        if family == "bert":
            model = ["model.vocab_size=%d" % c["vocab_size"], "model.hidden=%d" % c["hidden_size"],
                     "model.layers=%d" % c["num_hidden_layers"], "model.heads=%d" % c["num_attention_heads"],
                     "model.intermediate=%d" % c["intermediate_size"],
                     "model.max_positions=%d" % c["max_position_embeddings"]]
            V = c["vocab_size"]
        else:
            inner = c.get("n_inner") or 4 * c["n_embd"]
            model = ["model.vocab_size=%d" % c["vocab_size"], "model.hidden=%d" % c["n_embd"],
                     "model.layers=%d" % c["n_layer"], "model.heads=%d" % c["n_head"],
                     "model.intermediate=%d" % inner, "model.max_positions=%d" % c["n_positions"]]
            V = c["vocab_size"]
        run_dir = os.path.join(ctx.work, "hf-%s-train" % family)
        # One step at lr 1e-30 without weight decay: the update is far below f32's resolution,
        # so the checkpoint holds the folder's weights (train.max_steps >= 1 and train.lr > 0 are
        # required by the config checks).
        ctx.run_saobp("train-init-hf-%s" % family, [
            "train", QUICKSTART, "--init", folder, "model.family=%s" % family, "model.preset=custom"] + model + [
            "model.attention=original", "model.positions=learned", "data.kind=synthetic",
            "data.vocab_size=%d" % V, "train.seq_len=32", "train.batch_size=2", "train.max_steps=1",
            "train.warmup_steps=0", "train.lr=1e-30", "train.min_lr=0", "train.weight_decay=0",
            "train.eval_every=0", "train.log_every=0", "train.threads=2",
            "train.run_dir=%s" % run_dir] + ctx.device_overrides() + ["--quiet"])
        final = os.path.join(run_dir, "final")
        report_path = os.path.join(run_dir, "init_report.json")
        notes = []
        if os.path.exists(report_path):
            with open(report_path) as f:
                report = json.load(f)
            if report.get("initialized"):
                raise CheckFailed("saobp train --init %s initialized %s instead of loading them from the folder" % (
                    folder, report["initialized"]))
            result["init_report"] = {k: (len(v) if isinstance(v, (list, dict)) else v) for k, v in report.items()}
            if report.get("unused"):
                notes.append("unused by saobp: %s" % ", ".join(report["unused"]))
        else:
            notes.append("no init_report.json in %s" % run_dir)
        # The weights saobp saved against the folder's, by name (reported).
        import numpy as np
        theirs = read_tensors(os.path.join(folder, "model.safetensors"))
        ours = read_tensors(os.path.join(final, "model.safetensors"))
        common = [k for k in theirs if k in ours and theirs[k].shape == ours[k].shape]
        wdiff = max((float(np.max(np.abs(ours[k].astype(np.float64) - theirs[k].astype(np.float64))))
                     for k in common), default=None)
        result["weights"] = {"common": len(common), "only_transformers": sorted(set(theirs) - set(ours)),
                             "only_saobp": sorted(set(ours) - set(theirs)), "max_abs_diff": wdiff}
        summary = judge(ctx, result, ctx.inspect("hf-%s-train" % family, final, LM_IDS), folder, LM_IDS)
        result["notes"] = notes + result.get("notes", [])
        return "%s; saobp's saved weights: %d tensors by name, max |diff| %s" % (
            summary, len(common), "%.3g" % wdiff if wdiff is not None else "-")
    return run


def check_hf_finetune(name, family, task):
    def run(ctx, result):
        final = ctx.finetune(name, ctx.hf_folder(family), task, os.path.join(FIXTURES, "glue"))
        summary = judge(ctx, result, ctx.inspect(name, final), final)
        report_path = os.path.join(os.path.dirname(final), "init_report.json")
        if os.path.exists(report_path):  # what saobp took from the folder: all but the new head
            with open(report_path) as f:
                report = json.load(f)
            result["init_report"] = {k: (len(v) if isinstance(v, (list, dict)) else v) for k, v in report.items()}
            summary += "; from the folder: %d tensors loaded, new head %s" % (
                len(report.get("loaded", [])), ", ".join(report.get("initialized", [])) or "-")
        return summary
    return run


GLUE = os.path.join(FIXTURES, "glue")
CHECKS = [
    ("saobp/bert-mlm", check_saobp_lm("bert")),
    ("saobp/gpt2-lm", check_saobp_lm("gpt2")),
    ("saobp/bert-sst2", check_saobp_finetune("bert-sst2", "bert", "glue/sst2", GLUE)),
    ("saobp/bert-stsb", check_saobp_finetune("bert-stsb", "bert", "glue/stsb", GLUE)),
    ("saobp/bert-race", check_saobp_finetune("bert-race", "bert", "race/all", os.path.join(FIXTURES, "race", "RACE"))),
    ("saobp/bert-squad", check_saobp_finetune("bert-squad", "bert", "squad/v1.1", lambda ctx: ctx.squad_dir(),
                                              ["data.max_query_length=12", "data.doc_stride=16"])),
    ("saobp/gpt2-rte", check_saobp_finetune("gpt2-rte", "gpt2", "glue/rte", GLUE)),
    ("hf/bert-train-init", check_hf_train_init("bert")),
    ("hf/gpt2-train-init", check_hf_train_init("gpt2")),
    ("hf/bert-finetune-sst2", check_hf_finetune("hf-bert-sst2", "bert", "glue/sst2")),
    ("hf/gpt2-finetune-rte", check_hf_finetune("hf-gpt2-rte", "gpt2", "glue/rte")),
]


def versions():
    v = {"python": sys.version.split()[0]}
    for mod in ("torch", "transformers", "numpy"):
        try:
            v[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            v[mod] = "not importable (%s)" % type(e).__name__
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog="See the docstring of this file.")
    ap.add_argument("--saobp", default=os.path.join(ROOT, "build", "saobp"), help="the saobp binary (build/saobp)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (or cuda:N): saobp's train.device and torch's")
    ap.add_argument("--json", help="write a results summary here")
    ap.add_argument("--keep", help="make the runs in this folder and keep them (default: a temporary one)")
    ap.add_argument("--only", action="append", help="run the checks whose name contains this (repeatable)")
    ap.add_argument("--tolerance", type=float, default=1e-4,
                    help="pass when max |diff| <= tolerance x max |saobp| + 1e-6 (default 1e-4)")
    args = ap.parse_args()
    if not re.fullmatch(r"cpu|cuda(:\d+)?", args.device):
        ap.error("--device %r: expected cpu, cuda or cuda:N" % args.device)
    args.saobp = os.path.abspath(args.saobp)
    if not os.access(args.saobp, os.X_OK):
        sys.exit("%s: not an executable (build saobp, or pass --saobp PATH)" % args.saobp)
    checks = [(n, f) for n, f in CHECKS if not args.only or any(s in n for s in args.only)]
    if not checks:
        sys.exit("--only %s matches none of: %s" % (args.only, ", ".join(n for n, _ in CHECKS)))

    if args.keep:
        work = os.path.abspath(args.keep)
        if os.path.isdir(work) and os.listdir(work):
            sys.exit("--keep %s: the folder is not empty (the runs would collide with what it holds)" % work)
        os.makedirs(work, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="check_hf_transformers.")
    ctx = Context(args, work)
    info = versions()
    print("check_hf_transformers: saobp %s, device %s, %s; runs in %s" % (
        args.saobp, args.device, ", ".join("%s %s" % kv for kv in info.items()), work), flush=True)

    results = []
    t_all = time.time()
    try:
        for name, fn in checks:
            result = {"name": name}
            ctx.current = name
            t0 = time.time()
            try:
                detail = fn(ctx, result)
                result["status"] = "PASS"
                line = "PASS %s: %s" % (name, detail)
            except CheckFailed as e:
                result["status"] = "FAIL"
                result["error"] = str(e)
                line = "FAIL %s: %s" % (name, e)
            except Exception as e:  # noqa: BLE001  (a bug or an API change: reported, the next check runs)
                result["status"] = "FAIL"
                result["error"] = "%s: %s\n%s" % (type(e).__name__, e, traceback.format_exc())
                line = "FAIL %s: %s" % (name, result["error"])
            result["seconds"] = round(time.time() - t0, 2)
            if result.get("notes"):
                line += "\n  notes: " + "; ".join(result["notes"])
            print(line, flush=True)
            results.append(result)
    finally:
        failed = [r["name"] for r in results if r["status"] != "PASS"]
        summary = {"tool": "tools/check_hf_transformers.py", "saobp": args.saobp, "device": args.device,
                   "hf_device": ctx.hf_device() if ctx._torch is not None else None, "versions": info,
                   "tolerance": args.tolerance, "work": work if args.keep else None,
                   "seconds": round(time.time() - t_all, 1), "passed": len(results) - len(failed),
                   "failed": len(failed), "checks": results}
        if args.json:
            d = os.path.dirname(os.path.abspath(args.json))
            os.makedirs(d, exist_ok=True)
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=2, default=str)
                f.write("\n")
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print("%d of %d checks passed%s (%.0f s)" % (len(results) - len(failed), len(results),
                                                  "; failed: " + ", ".join(failed) if failed else "",
                                                  time.time() - t_all))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
