#!/usr/bin/env python3
"""Replays prompt lookup on recorded greedy generations under a given verification-cost curve.

    scripts/spec_replay.py SEQUENCES.jsonl --curve 1,1.36,1.68,1.94 [--policy engine|must|...]

SEQUENCES.jsonl is `jllm-bench --workload FILE --sequences SEQUENCES.jsonl` (each prompt's token
ids and its greedy output). Greedy output does not depend on the drafts, so what a drafter would
have proposed at every step, and how much of it the model would have accepted, follows from the
sequence alone; the time follows from the cost curve T(n), a forward of n tokens in one-token
steps (measured with `jllm-bench --verify 1,2,3,4`, or a model of a machine: --flat 0.05 is
T(n) = 1 + 0.05 (n - 1)). Prints per group of prompts the speed-up over plain decoding (tokens per
unit of T(1)), tokens per forward and drafted / accepted tokens, for the engine's prompt lookup
(src/engine/speculative.cpp's ngram_draft and SpecTuner, mirrored here) and, as a bound, a copy
oracle: it knows the continuation, may draft (all right) the longest run that follows any earlier
occurrence of the pending token, and takes the cheapest schedule of such drafts over the whole
answer, so no drafter that copies earlier text does better. A study tool: the engine's measured
rates (`jllm-bench --workload`) are the numbers that count.
"""
import argparse
import json
import sys

NGRAM_MAX = 6
DECAY, PROBE, CARRY = 0.9, 32, 4.0


def ngram_draft(seq, n, max_len, min_match):
    """The longest suffix of seq[:n] (NGRAM_MAX .. min_match tokens) seen earlier, latest among
    equals: (the tokens that followed it, at most max_len; the match length)."""
    if max_len <= 0 or n < min_match + 1:
        return [], 0
    last = n - 1
    best_len = best_end = 0
    for j in range(last - 1, -1, -1):
        if seq[j] != seq[last]:
            continue
        length = 1
        while length < NGRAM_MAX and length <= j and seq[j - length] == seq[last - length]:
            length += 1
        if length > best_len:
            best_len, best_end = length, j
            if length == NGRAM_MAX:
                break
    if best_len < min_match:
        return [], 0
    start = best_end + 1
    return seq[start:start + min(max_len, n - start)], best_len


class Tuner:
    """SpecTuner's prompt-lookup part: per-class decayed acceptance counts, k maximizing E(k) / T(k + 1)."""

    def __init__(self, curve, classes):
        self.curve, self.acc, self.rej, self.idle = curve, [1.0] * classes, [1.0] * classes, [0] * classes

    def reset_request(self):
        for c in range(len(self.acc)):
            w = self.acc[c] + self.rej[c]
            if w > CARRY:
                self.acc[c] *= CARRY / w
                self.rej[c] *= CARRY / w
            self.idle[c] = PROBE - 1

    def length(self, c, max_len, must, may_probe=True):
        a = self.acc[c] / (self.acc[c] + self.rej[c])
        best, best_k, e, ak = (-1.0 if must else 1.0), 0, 1.0, 1.0
        for k in range(1, max_len + 1):
            ak *= a
            e += ak
            r = e / self.curve[k]  # curve[k]: T(k + 1)
            if r > best:
                best, best_k = r, k
        if best_k > 0:
            self.idle[c] = 0
            return best_k
        self.idle[c] += 1
        if self.idle[c] >= PROBE and may_probe:
            self.idle[c] = 0
            return min(2, max_len)
        return 0

    def verified(self, c, proposed, accepted):
        self.acc[c] = self.acc[c] * DECAY + accepted
        self.rej[c] = self.rej[c] * DECAY + (1 if accepted < proposed else 0)


def copy_reach(seq, n, max_len):
    """The longest run of seq[n:] (at most max_len tokens) that follows an earlier occurrence of
    the pending token seq[n - 1] in seq[:n]: what any copy of earlier text could have drafted right."""
    best = 0
    for j in range(n - 2, -1, -1):
        if seq[j] != seq[n - 1]:
            continue
        a = 0
        while a < max_len and j + 1 + a < n and n + a < len(seq) and seq[j + 1 + a] == seq[n + a]:
            a += 1
        best = max(best, a)
    return best


def copy_oracle(seq, p, curve, max_len):
    """The cheapest schedule of forwards from pending position p to the end when each forward may
    draft up to copy_reach tokens, all right (a shortest path over positions): the bound of every
    drafter that copies earlier text. Returns (cost, forwards, drafted)."""
    end = len(seq) - 1
    best = [(0.0, 0, 0)] * (end + 1)  # from pending position i: (cost, forwards, drafted)
    for i in range(end - 1, p - 1, -1):
        reach = min(copy_reach(seq, i + 1, max_len), end - i - 1)
        best[i] = min((curve[k] + best[i + k + 1][0], best[i + k + 1][1] + 1, best[i + k + 1][2] + k)
                      for k in range(reach + 1))
    return best[p]


def replay(records, curve, policy, max_len):
    # (shortest match, an acceptance per match length, always draft, proposals not drafted scored
    # against the sampled token instead of probes); min2 and min2-must: the engine before 2026-12-07
    min_match, per_length, must, shadow = {"engine": (1, True, False, True), "must": (1, True, True, True),
                                           "min2": (2, False, False, False),
                                           "min2-must": (2, False, True, False)}.get(policy, (0, 0, 0, 0))
    tuner = Tuner(curve, NGRAM_MAX + 1)
    groups = {}
    for r in records:
        seq, p = r["tokens"], r["prompt_tokens"]
        tuner.reset_request()
        cost = forwards = drafted = accepted = 0
        i = p  # seq[i] is the pending token (the prefill sampled seq[p]); a forward verifies the draft after it
        if policy == "oracle":
            cost, forwards, drafted = copy_oracle(seq, p, curve, max_len)
            accepted = drafted
        while policy != "oracle" and i < len(seq) - 1:
            cont = seq[i + 1:]
            room = min(max_len, len(cont))
            found, match = ngram_draft(seq, i + 1, room, min_match)
            cls = match if per_length else 0
            k = tuner.length(cls, len(found), must, not shadow) if found else 0
            draft = found[:k]
            a = 0
            while a < len(draft) and draft[a] == cont[a]:
                a += 1
            if draft:
                tuner.verified(cls, len(draft), a)
            elif found and shadow:
                tuner.verified(cls, 1, 1 if found[0] == cont[0] else 0)
            cost += curve[len(draft)]
            forwards += 1
            drafted += len(draft)
            accepted += a
            i += a + 1
        g = groups.setdefault(r.get("group") or r.get("kind", "all"), [0, 0.0, 0, 0, 0])
        for q, v in enumerate((len(seq) - 1 - p, cost, forwards, drafted, accepted)):
            g[q] += v
    return groups


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sequences")
    ap.add_argument("--curve", help="T(1),T(2),..: a forward of n tokens in one-token steps")
    ap.add_argument("--flat", type=float, help="T(n) = 1 + FLAT (n - 1) instead of --curve")
    ap.add_argument("--draft-max", type=int, default=16, help="tokens drafted at most (also capped by the curve)")
    ap.add_argument("--policy", default="engine,oracle",
                    help="comma-separated: engine (auto: matches of 1..6 tokens, acceptance per length, learned on "
                         "every match), must (--spec ngram), min2 / min2-must (the engine before 2026-12-07: matches "
                         "of 2..6, one acceptance, learned while drafting), oracle (the bound)")
    args = ap.parse_args()
    if (args.curve is None) == (args.flat is None):
        sys.exit("spec_replay.py: give one of --curve and --flat")
    if args.curve is not None:
        curve = [float(x) for x in args.curve.split(",")]
        if not curve or curve[0] != 1.0 or any(b < a for a, b in zip(curve, curve[1:])):
            sys.exit("spec_replay.py: --curve starts at 1 and does not fall")
    else:
        curve = [1.0 + args.flat * n for n in range(args.draft_max + 1)]
    max_len = min(args.draft_max, len(curve) - 1)
    with open(args.sequences) as f:
        records = [json.loads(line) for line in f if line.strip()]
    print(f"{len(records)} prompts, T(n) = {', '.join(f'{c:g}' for c in curve[:max_len + 1])}, drafts <= {max_len}")
    print("| policy | group | speed-up | tokens per forward | accepted / drafted |")
    print("|---|---|---:|---:|---:|")
    for policy in args.policy.split(","):
        if policy not in ("engine", "must", "min2", "min2-must", "oracle"):
            sys.exit(f"spec_replay.py: unknown policy '{policy}'")
        for name, (tokens, cost, forwards, drafted, accepted) in sorted(replay(records, curve, policy, max_len).items()):
            print(f"| {policy} | {name} | {tokens / cost:.3f}x | {tokens / forwards:.2f} | {accepted} / {drafted} |")


if __name__ == "__main__":
    main()
