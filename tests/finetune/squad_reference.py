#!/usr/bin/env python3
"""The SQuAD answer normalization and F1 of the official evaluate-v1.1.py / evaluate-v2.0.py,
restated with the standard library only, as the oracle for src/finetune/metrics.cpp.

  squad_reference.py table       prints the C++ rows of kPythonNormalize (normalize_answer of each of
                                 CASES) and kPythonF1 (compute_f1 of each of F1_PAIRS) in
                                 tests/finetune/test_metrics.cpp
  squad_reference.py normalize   reads JSON strings, one a line, and prints normalize_answer of each
                                 as a JSON string, one a line (to diff against a C++ harness)
"""
import collections
import json
import re
import string
import sys


def normalize_answer(s):
    # white_space_fix(remove_articles(remove_punc(lower(s)))), as both official scripts.
    s = s.lower()
    s = ''.join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(re.compile(r'\b(a|an|the)\b', re.UNICODE), ' ', s)
    return ' '.join(s.split())


def compute_f1(a_gold, a_pred):
    # evaluate-v2.0.py: 1 when both normalize to nothing, 0 when one does.
    gold_toks = normalize_answer(a_gold).split() if a_gold else []
    pred_toks = normalize_answer(a_pred).split() if a_pred else []
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


CASES = [
    'The Beatles', 'the beatles!', 'Theater', 'a banana and an apple', 'A', 'An', 'THE',
    'Beyonc\u00e9\u2019s', 'Beyonc\u00e9\'s', 'snake_case the_end', 'the_', '\u00a0the\u3000cat\u2028',
    '\x1cx\x1fy\x85z', '\u0130stanbul', '\u039f\u0394\u039f\u03a3', '\u03a3\u039f\u03a3.',
    '\u0391\u03a3\u0391', '\u03a3', '\u0391\u03a3\u0301', '\u0391\u02b0\u03a3', 'a\u0301 b', '\u00aa\u03a3',
    '\u00bfQu\u00e9?', '\u00abthe\u00bb', 'the\u2014an', '\u2460 a \u2461', '\u212a', '\u0394\u0399\u0395\u0398\u039d\u0397\u03a3 \u0391\u039a\u0391\u0394\u0397\u039c\u0399\u0391\u03a3',
    '  (1991) ', '$3.50', 'an\tapple\r\nthe\x0b', '', '...', 'the a an',
]

F1_PAIRS = [  # (prediction, gold)
    ('the Eiffel tower', 'Eiffel Tower in Paris'), ('a b a b c', 'b b b a'), ('New York City', 'new york'),
    ('1,000 people', '1000'), ('Beyonc\u00e9\u2019s', "Beyonc\u00e9's"), ('', ''), ('', 'The'), ('x', ''),
    ('\u039f\u0394\u039f\u03a3', '\u03bf\u03b4\u03bf\u03c2'), ('\u0130stanbul', 'istanbul'),
    ('the the cat', 'cat cat'), ('red\u3000car', 'red car'),
]


def cpp_literal(s):
    out = []
    for ch in s:
        c = ord(ch)
        if ch == '"' or ch == '\\':
            out.append('\\' + ch)
        elif 0x20 <= c < 0x7F:
            out.append(ch)
        elif c > 0x9F:
            out.append('\\U%08X' % c if c > 0xFFFF else '\\u%04X' % c)
        else:  # C++ forbids \u below U+00A0: spell the UTF-8 bytes, each closing its literal
            out.append(''.join('\\x%02X""' % b for b in ch.encode()))
    return '"' + ''.join(out) + '"'


def main():
    if len(sys.argv) == 2 and sys.argv[1] == 'table':
        for s in CASES:
            print('    {%s, %s},' % (cpp_literal(s), cpp_literal(normalize_answer(s))))
        print()
        for pred, gold in F1_PAIRS:
            print('    {%s, %s, %r},' % (cpp_literal(pred), cpp_literal(gold), float(compute_f1(gold, pred))))
    elif len(sys.argv) == 2 and sys.argv[1] == 'normalize':
        for line in sys.stdin:
            print(json.dumps(normalize_answer(json.loads(line))))
    else:
        sys.exit(__doc__)


if __name__ == '__main__':
    main()
