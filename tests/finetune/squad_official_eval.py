"""SQuAD scoring as the official evaluate-v1.1.py and evaluate-v2.0.py scripts define it, written
anew from their published rules (the test's independent check of saobp's metric on the same
predictions.json): normalize (lower case, drop string.punctuation, drop the words a/an/the, collapse
whitespace), exact match and token F1, each question's best over its gold answers, x100; v2.0
treats a question without gold answers as gold "" and splits HasAns / NoAns.

Usage: squad_official_eval.py {1.1|2.0} DEV.json PREDICTIONS.json  -> prints the scores as JSON.
"""
import collections
import json
import re
import string
import sys


def normalize(s):
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s, flags=re.UNICODE)
    return " ".join(s.split())


def f1(pred, gold, v2):
    p, g = normalize(pred).split(), normalize(gold).split()
    if v2 and (not p or not g):
        return float(p == g)
    same = sum((collections.Counter(p) & collections.Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def main():
    version, dev, preds = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
    v2 = version == "2.0"
    rows = []  # (has_answer, exact, f1)
    for article in dev["data"]:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                golds = [a["text"] for a in qa["answers"]]
                if v2:
                    golds = [t for t in golds if normalize(t)] or [""]
                pred = preds.get(qa["id"])
                if pred is None:
                    rows.append((golds != [""], 0.0, 0.0))
                    continue
                rows.append((golds != [""], max(float(normalize(pred) == normalize(t)) for t in golds),
                             max(f1(pred, t, v2) for t in golds)))
    mean = lambda xs: 100.0 * sum(xs) / len(xs)
    if not v2:
        out = {"exact_match": mean([r[1] for r in rows]), "f1": mean([r[2] for r in rows])}
    else:
        out = {"exact": mean([r[1] for r in rows]), "f1": mean([r[2] for r in rows]), "total": len(rows)}
        for name, keep in (("HasAns", True), ("NoAns", False)):
            part = [r for r in rows if r[0] == keep]
            if part:
                out[name + "_exact"] = mean([r[1] for r in part])
                out[name + "_f1"] = mean([r[2] for r in part])
                out[name + "_total"] = len(part)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
