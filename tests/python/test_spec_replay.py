"""scripts/spec_replay.py: its prompt lookup is the engine's (the cases of
tests/unit/speculative/test_speculative.cpp's NgramDraft tests), and its replay counts what a
sequence allows: everything copied drafts long, nothing recurring drafts nothing."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import spec_replay  # noqa: E402

SCRIPT = os.path.join(ROOT, "scripts", "spec_replay.py")


def test_prompt_lookup_matches_the_engines_cases():
    a = [1, 2, 3, 4, 9, 1, 2, 3, 5, 6, 8, 1, 2, 3]
    assert spec_replay.ngram_draft(a, len(a), 3, 1) == ([5, 6, 8], 3)
    b = [7, 1, 2, 3, 4, 9, 1, 2, 3, 5, 7, 1, 2, 3]
    assert spec_replay.ngram_draft(b, len(b), 2, 1) == ([4, 9], 4)
    c = [5, 6, 7, 8, 5, 6]
    assert spec_replay.ngram_draft(c, len(c), 8, 1) == ([7, 8, 5, 6], 2)
    assert spec_replay.ngram_draft([3, 3, 3], 3, 4, 1) == ([3], 2)
    d = [1, 2, 3, 4, 1]
    assert spec_replay.ngram_draft(d, len(d), 4, 1) == ([2, 3, 4, 1], 1)
    assert spec_replay.ngram_draft(d, len(d), 4, 2) == ([], 0)
    assert spec_replay.ngram_draft([1, 2, 3, 4], 4, 4, 1) == ([], 0)


def record(prompt, output, group):
    return {"name": group, "kind": group, "group": group, "prompt_tokens": len(prompt), "tokens": prompt + output}


def test_replay_counts_what_the_sequence_allows():
    prompt = list(range(100, 160))
    copied = record(prompt, prompt[:40], "copy")  # the output repeats the prompt: every draft right
    fresh = record(prompt, list(range(1000, 1040)), "fresh")  # no token recurs: nothing to draft
    flat = [1.0 + 0.05 * n for n in range(5)]
    for policy in ("engine", "must", "oracle"):
        groups = spec_replay.replay([copied, fresh], flat, policy, 4)
        tokens, cost, forwards, drafted, accepted = groups["copy"]
        assert tokens == 39  # the prefill sampled the first of the 40
        assert accepted == drafted > 0
        assert tokens / forwards > 3.0, policy  # most forwards verify 4 drafted tokens
        tokens, cost, forwards, drafted, accepted = groups["fresh"]
        assert (drafted, forwards, cost) == (0, 39, 39.0)
    # Where a second token costs a whole step, drafting gains nothing even when right: the oracle's
    # cheapest schedule costs a step a token.
    steep = [1.0, 2.0, 3.0]
    assert spec_replay.replay([copied], steep, "oracle", 2)["copy"][1] == 39.0
    # The oracle is a bound: no policy beats it on any curve.
    for curve in (flat, steep, [1.0, 1.4, 1.7, 2.0, 2.6]):
        best = spec_replay.replay([copied, fresh], curve, "oracle", len(curve) - 1)
        for policy in ("engine", "must", "min2", "min2-must"):
            g = spec_replay.replay([copied, fresh], curve, policy, len(curve) - 1)
            for name in ("copy", "fresh"):
                assert g[name][1] >= best[name][1] - 1e-9, (policy, name, curve)


def test_cli_prints_a_row_per_policy_and_group_and_refuses_bad_curves(tmp_path):
    path = tmp_path / "seq.jsonl"
    prompt = list(range(10, 40))
    path.write_text(json.dumps(record(prompt, prompt[5:20], "copy")) + "\n")
    out = subprocess.run([sys.executable, SCRIPT, str(path), "--curve", "1,1.1,1.2", "--policy", "engine,min2,oracle"],
                         capture_output=True, text=True, check=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("| engine") or line.startswith("| min2")
            or line.startswith("| oracle")]
    assert len(rows) == 3 and all("| copy |" in r for r in rows)
    for bad in (["--curve", "1.2,1"], ["--curve", "1,0.9"], ["--flat", "0.1", "--curve", "1,2"], []):
        p = subprocess.run([sys.executable, SCRIPT, str(path)] + bad, capture_output=True, text=True)
        assert p.returncode != 0 and "spec_replay.py" in p.stderr
    p = subprocess.run([sys.executable, SCRIPT, str(path), "--flat", "0.1", "--policy", "nope"],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "unknown policy" in p.stderr


def test_bench_records_what_the_replay_reads(tmp_path):
    """jllm-bench --workload --sequences on the default model: one line per prompt, the prompt's
    tokens then `off`'s output, which the replay takes."""
    from server_harness import BUILD, MODEL
    bench = os.path.join(BUILD, "apps", "bench", "jllm-bench")
    missing = [p for p in (bench, MODEL) if not os.path.exists(p)]
    if missing:
        if os.environ.get("JLLM_REQUIRE_MODELS") == "1":
            pytest.fail("missing: " + ", ".join(missing))
        pytest.skip("missing: " + ", ".join(missing))
    prompts = [{"name": "echo", "kind": "chat", "group": "g", "messages": [
                   {"role": "user", "content": "Repeat after me: the kitchen light is on, the kitchen light is on."}]},
               {"name": "count", "kind": "code", "messages": [{"role": "user", "content": "Count from 1 to 5."}]}]
    wl = tmp_path / "prompts.json"
    wl.write_text(json.dumps(prompts))
    out = tmp_path / "seq.jsonl"
    p = subprocess.run([bench, "-m", MODEL, "--workload", str(wl), "--modes", "off,ngram", "--tokens", "12", "-t", "2",
                        "--sequences", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["name"] for r in lines] == ["echo", "count"]
    assert [r["group"] for r in lines] == ["g", ""]
    for r in lines:
        assert r["kind"] in ("chat", "code")
        assert 10 < r["prompt_tokens"] < len(r["tokens"]) <= r["prompt_tokens"] + 12
        assert all(isinstance(t, int) and t >= 0 for t in r["tokens"])
    rep = subprocess.run([sys.executable, SCRIPT, str(out), "--flat", "0.05"], capture_output=True, text=True, check=True)
    assert "| engine | g |" in rep.stdout and "| oracle | code |" in rep.stdout  # the group, else the kind
    p = subprocess.run([bench, "-m", MODEL, "--workload", str(wl), "--modes", "off", "--tokens", "2", "-t", "2",
                        "--sequences", str(tmp_path / "no" / "such" / "dir.jsonl")],
                       capture_output=True, text=True)
    assert p.returncode != 0 and "--sequences: cannot write" in p.stderr
