#!/usr/bin/env python3
"""scripts/gpu/peer_rows.py — the rows of scripts/gpu/bench.sh's side-by-side table: our
jllm-bench JSON (-o json) against llama-bench's JSON lines (-o jsonl) of the same file, tests
matched by (prompt tokens, generated tokens, depth); both sides' medians (llama-bench's of its
samples_ts, whose first prefill sample often runs far slower: its avg_ts where it has none).

Usage: peer_rows.py MODEL KV_LABEL OURS.json [PEER.jsonl]
Prints one markdown row per test of ours: | model | test | KV | ours | llama.cpp | ours / llama.cpp |
(llama.cpp "—" where the peer file is missing, empty or has no such test). Exit status 1 when
OURS.json cannot be read.
"""
import json
import statistics
import sys


def ours_tests(path):
    with open(path) as f:
        return json.load(f)["tests"]


def peer_tests(path):
    """(n_prompt, n_gen, n_depth) -> median tok/s of llama-bench's JSON lines."""
    out = {}
    if not path:
        return out
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                r = json.loads(line)
                samples = r.get("samples_ts") or [r["avg_ts"]]
                out[(r["n_prompt"], r["n_gen"], r.get("n_depth", 0))] = float(statistics.median(samples))
    except (OSError, ValueError, KeyError):
        return {}
    return out


def main(argv):
    if len(argv) not in (4, 5):
        sys.stderr.write(__doc__)
        return 2
    model, kv, ours_path = argv[1], argv[2], argv[3]
    peer = peer_tests(argv[4] if len(argv) == 5 else "")
    try:
        tests = ours_tests(ours_path)
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write(f"peer_rows.py: {ours_path}: {e}\n")
        return 1
    for t in tests:
        key = (t["n_prompt"], t["n_gen"], t["n_depth"])
        ours = float(t["tps_median"])
        theirs = peer.get(key)
        cell = f"{theirs:,.1f}" if theirs else "—"
        ratio = f"{ours / theirs:.2f}x" if theirs else "—"
        print(f"| {model} | {t['test']} | {kv} | {ours:,.1f} | {cell} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
