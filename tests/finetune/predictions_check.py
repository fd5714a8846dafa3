"""Scores a predictions_<split>.jsonl file of saobp anew, from its lines alone (the test's
independent check of results.json's figures on the same predictions): accuracy is the share of
labeled lines whose "prediction" equals their "label"; with labels 0/1 also F1 of class 1 and
Matthews' correlation; a regression file (float predictions) gets Pearson's r of prediction
against label. Every line's "prediction" must be the first argmax of its
"scores" (and, zero-shot, "prediction_length_normalized" the first argmax of scores / tokens), or
the script fails.

Usage: predictions_check.py PREDICTIONS.jsonl  -> prints the scores as JSON.
"""
import json
import math
import sys


def first_argmax(values):
    return values.index(max(values))


def pearson(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return sxy / math.sqrt(sxx * syy)


def main():
    rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
    out = {"examples": len(rows)}
    labeled = [r for r in rows if "label" in r]
    for i, r in enumerate(rows):
        if not isinstance(r.get("id"), str):
            sys.exit("line %d: no string id" % (i + 1))
        if "scores" in r and r["prediction"] != first_argmax(r["scores"]):
            sys.exit("line %d: prediction %r is not the argmax of %r" % (i + 1, r["prediction"], r["scores"]))
        if "tokens" in r:
            normalized = [s / t for s, t in zip(r["scores"], r["tokens"])]
            if r["prediction_length_normalized"] != first_argmax(normalized):
                sys.exit("line %d: prediction_length_normalized is not the argmax of scores / tokens" % (i + 1))
    if labeled and isinstance(labeled[0]["prediction"], float):
        out["pearson"] = pearson([r["prediction"] for r in labeled], [r["label"] for r in labeled])
    elif labeled:
        out["accuracy"] = sum(r["prediction"] == r["label"] for r in labeled) / len(labeled)
        if "prediction_length_normalized" not in labeled[0] and all(r["label"] in (0, 1) for r in labeled):
            tp = sum(r["prediction"] == 1 and r["label"] == 1 for r in labeled)
            tn = sum(r["prediction"] == 0 and r["label"] == 0 for r in labeled)
            fp = sum(r["prediction"] == 1 and r["label"] == 0 for r in labeled)
            fn = sum(r["prediction"] == 0 and r["label"] == 1 for r in labeled)
            out["f1"] = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
            d = math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
            out["matthews_correlation"] = (tp * tn - fp * fn) / d if d else 0.0
        if "prediction_length_normalized" in labeled[0]:
            right = sum(r["prediction_length_normalized"] == r["label"] for r in labeled)
            out["accuracy_length_normalized"] = right / len(labeled)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
