"""tests/python/test_server_cli.py — jetson-llm-server's command line: --version, --help, flag
errors, llama-server spellings (accepted with a note, mapped, or refused with a reason), and a
model that cannot be loaded."""
import subprocess

import pytest

from server_harness import MODEL, Server, binary_path, require_artifacts


def run(*args, timeout=30):
    require_artifacts()
    p = subprocess.run([binary_path(), *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def test_version_and_help():
    rc, out, _ = run("--version")
    assert rc == 0 and out.startswith("jetson-llm-server ")
    rc, out, _ = run("-h")
    assert rc == 0
    for flag in ("--host", "--port", "--ctx-size", "--api-key", "--api-key-file", "--alias", "--kv-type", "--threads",
                 "--max-queue", "--timeout", "--chat-template", "--device", "--verbose"):
        assert flag in out, flag


@pytest.mark.parametrize("args", [["--bogus"], ["-m", MODEL, "--port", "99999"], ["-m", MODEL, "--kv-type", "q4"],
                                  ["-m", MODEL, "--max-queue", "-1"], []])
def test_flag_errors(args):
    rc, _, err = run(*args)
    assert rc == 2 and "error" in err


@pytest.mark.parametrize("args,why", [(["--lora", "x.gguf"], "adapters"), (["-np", "4"], "one generation"),
                                      (["--embeddings"], "embeddings"), (["-ctk", "q4_0"], "int8"),
                                      (["--ssl-key-file", "k"], "TLS")])
def test_llama_server_flags_refused(args, why):
    rc, _, err = run("-m", MODEL, *args)
    assert rc == 2 and why in err


def test_llama_server_flags_accepted():
    s = Server("-ngl", "99", "--flash-attn", "-np", "1", "--ctx-size", "256", "--threads", "2", "-ctk", "f16",
               "--alias", "home", "--metrics", "--no-mmap", "-to", "30", "-fa", "on", "--flash-attn=auto",
               "--cache-reuse", "256", ctx=None)
    try:
        text = s.log_text()
        assert "-ngl ignored" in text
        assert "-fa on ignored" in text and "--flash-attn auto ignored" in text
        assert "KV fp16" in text and "ctx 256" in text
        status, _, body = s.request("GET", "/v1/models")
        assert status == 200 and b'"home"' in body
    finally:
        s.stop()


def test_missing_model_exits_1():
    rc, out, err = run("-m", "/nonexistent/model.gguf", "-p", "0")
    assert rc == 1 and "model.gguf" in err
    assert "listening" not in out + err  # reported before anything listens


@pytest.mark.parametrize("args,named", [(["--bogus", "3"], "unknown option --bogus"),
                                        (["stray"], "unexpected argument stray"),
                                        (["--flash-attn=maybe"], "expected on, off or auto"),
                                        (["--slot-save-path", "/tmp"], "--kv-dir")])
def test_unknown_and_bad_flags_are_named(args, named):
    rc, _, err = run("-m", MODEL, "-p", "0", *args)
    assert rc == 2 and named in err, err


def test_port_in_use_exits_1():
    s = Server()
    try:
        rc, _, err = run("-m", MODEL, "-p", str(s.port))
        assert rc == 1 and "cannot listen" in err
    finally:
        s.stop()
