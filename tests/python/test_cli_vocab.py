"""tests/python/test_cli_vocab.py — `jetson-llm --tokenize / --detokenize / --info` on a vocab-only
GGUF (llama.cpp's ggml-vocab-gpt-2.gguf from shared/testdata/vocab, whose architecture the engine
does not run): the ids equal the file's own test vectors, the text comes back, no weights are
loaded and no load banner is printed."""
import os
import subprocess

import pytest

from server_harness import BUILD, ROOT

SHARED = os.environ.get("JLLM_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
VOCAB = os.path.join(SHARED, "testdata", "vocab", "ggml-vocab-gpt-2.gguf")
CLI = os.path.join(BUILD, "jetson-llm")


def cases():
    with open(VOCAB + ".inp", encoding="utf-8") as f:
        inputs = f.read().split("\n__ggml_vocab_test__\n")
    with open(VOCAB + ".out", encoding="utf-8") as f:
        outputs = f.read().split("\n")
    out = []
    for text, ids in zip(inputs, outputs):
        if text.strip() and "\n" not in text and not text.startswith("-"):
            out.append((text, ids.strip()))
    return out[:8]


def run(*args):
    if not os.path.exists(CLI) or not os.path.exists(VOCAB):
        if os.environ.get("JLLM_REQUIRE_MODELS") == "1":
            pytest.fail("missing %s or %s" % (CLI, VOCAB))
        pytest.skip("missing the CLI or the vocab file")
    return subprocess.run([CLI, "-m", VOCAB, *args], capture_output=True, text=True, timeout=30)


def test_tokenize_and_detokenize_a_vocab_only_file():
    checked = 0
    for text, ids in cases():
        r = run("--tokenize", "-p", text)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == ids, (text, r.stdout, ids)
        assert "[engine]" not in r.stderr, r.stderr  # no load banner, no memory table
        back = run("--detokenize", "-p", ids)
        assert back.returncode == 0 and back.stdout[:-1] == text, (text, back.stdout)
        checked += 1
    assert checked >= 5


def test_info_and_bad_ids():
    r = run("--info")
    assert r.returncode == 0 and "gpt2" in r.stdout and "0 tensors" in r.stdout
    r = run("--detokenize", "-p", "1 99999999")
    assert r.returncode != 0 and "invalid token id" in r.stderr
