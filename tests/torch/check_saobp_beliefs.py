#!/usr/bin/env python3
"""tools/bench_pytorch.py's SAOBP in plain tensor ops (saobp_beliefs) against saobp itself:
`saobp explain` prints the scores s and the refined attention B of a random example (6
decimals); saobp_beliefs, given the same s, must give the same B, for bp_high and bp_low, the
encoder and the causal decoder, T up to 12 and two λ.

    python3 tests/torch/check_saobp_beliefs.py path/to/saobp

Exit 0 when every case agrees to 2e-6, 1 when one does not, 77 (CTest's skip) without torch."""
import os
import re
import subprocess
import sys

try:
    import torch
except ImportError:
    print("check_saobp_beliefs: no torch (Debian's python3-torch): skipped")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
from bench_pytorch import potts_c, saobp_beliefs  # noqa: E402


def matrix(text, heading, T):
    """The T rows under the line starting with `heading`: floats, None for a '·' entry."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith(heading))
    rows = []
    for l in lines[start + 1:start + 1 + T]:
        m = re.match(r"\s*row (\d+):(.*)$", l)
        if not m or int(m.group(1)) != len(rows):
            raise SystemExit(f"check_saobp_beliefs: unexpected line under '{heading}': {l!r}")
        rows.append([None if x == "·" else float(x) for x in m.group(2).split()])
    return rows


def main():
    saobp = sys.argv[1] if len(sys.argv) > 1 else "build/saobp"
    worst, cases = 0.0, 0
    for variant in ("bp_high", "bp_low"):
        for causal in (False, True):
            for T, lam, seed in ((1, 0.5, 42), (5, 0.5, 42), (12, 1.3, 7)):
                args = [saobp, "explain", "--T", str(T), "--lambda", str(lam), "--variant", variant,
                        "--seed", str(seed)] + (["--causal"] if causal else [])
                out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
                s_rows = matrix(out, "1. scores", T)
                b_rows = matrix(out, "8. B", T)
                allowed = torch.tensor([[x is not None for x in r] for r in s_rows]).view(1, 1, T, T)
                s = torch.tensor([[x if x is not None else 0.0 for x in r] for r in s_rows],
                                 dtype=torch.float64).view(1, 1, T, T)
                c = potts_c(torch.tensor([lam], dtype=torch.float64), variant == "bp_high")
                sender = torch.ones(1, 1, T, 1, dtype=torch.float64)
                b = saobp_beliefs(s, allowed, sender, c, 1, causal)[0, 0]
                for j in range(T):
                    for k in range(T):
                        want = b_rows[j][k]
                        got = b[j, k].item()
                        if want is None:
                            if got != 0.0:
                                print(f"FAIL {' '.join(args[1:])}: B[{j}][{k}] is not allowed but {got}")
                                return 1
                            continue
                        worst = max(worst, abs(got - want))
                cases += 1
    print(f"check_saobp_beliefs: {cases} cases, largest |B - saobp explain's B| = {worst:.2e}")
    if worst > 2e-6:
        print("FAIL: more than 2e-6 (explain prints 6 decimals)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
