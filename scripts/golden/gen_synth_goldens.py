#!/usr/bin/env python3
"""scripts/golden/gen_synth_goldens.py — tensor types that llama.cpp's own quantizer chooses
for each jllm-synth preset under Q4_K_M, as a golden for tests/unit/synth.

For every preset: jllm-synth writes the F16 file (--zeros: the layout is what matters; llama.cpp's
dry run never reads the weights), then llama-cpp-python's llama_model_quantize runs on it with
ftype MOSTLY_Q4_K_M and dry_run, and its per-tensor log lines ("name - [shape], type = f16,
... (q4_K)") give the type it would write. Output: tests/data/synth/q4_k_m_types.tsv with lines
"preset<TAB>tensor<TAB>TYPE" (types upper-case as GGUF tools print them).

Usage: scripts/golden/gen_synth_goldens.py [--synth build/apps/synth/jllm-synth]
                                          [--tmp /tmp] [--presets a,b,...]
"""
import argparse
import ctypes
import os
import re
import subprocess
import sys

import llama_cpp

PRESETS = ["qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen2.5-0.5b", "llama3.2-1b",
           "llama3.2-3b", "tiny-qwen3", "tiny-qwen2", "tiny-llama", "tiny-qwen3-untied"]
LLAMA_FTYPE_MOSTLY_Q4_K_M = 15

_log = []


@llama_cpp.llama_log_callback
def _collect(level, text, user_data):
    _log.append(text.decode("utf-8", "replace"))


def llama_types(f16_path, out_path):
    """Runs llama.cpp's quantizer in dry-run mode; returns {tensor: TYPE}."""
    del _log[:]
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = 2
    params.dry_run = True
    rc = llama_cpp.llama_model_quantize(f16_path.encode(), out_path.encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError("llama_model_quantize failed (%d):\n%s" % (rc, "".join(_log)[-3000:]))
    text = "".join(_log)
    types = {}
    line_re = re.compile(r"\[\s*\d+/\s*\d+\]\s+(\S+)\s+-\s+\[[^\]]*\],\s+type =\s+(\w+),\s+size =[^\n]*?(?:\((\w+)\))?\s*$")
    for line in text.splitlines():
        m = line_re.search(line)
        if not m:
            continue
        name, cur, new = m.group(1), m.group(2), m.group(3)
        types[name] = (new or cur).upper()
    if not types:
        raise RuntimeError("no tensor lines in llama.cpp's log:\n" + text[-3000:])
    return types


def main():
    ap = argparse.ArgumentParser()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--synth", default=os.path.join(root, "build/apps/synth/jllm-synth"))
    ap.add_argument("--tmp", default="/tmp")
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--out", default=os.path.join(root, "tests/data/synth/q4_k_m_types.tsv"))
    args = ap.parse_args()

    llama_cpp.llama_log_set(_collect, ctypes.c_void_p(0))
    rows = []
    for preset in args.presets.split(","):
        f16 = os.path.join(args.tmp, "synth-golden-%s-f16.gguf" % preset)
        subprocess.run([args.synth, "--preset", preset, "--quant", "f16", "--zeros", "-q", "-o", f16], check=True)
        try:
            types = llama_types(f16, f16 + ".q4_k_m")
        finally:
            os.remove(f16)
        for name, t in types.items():
            rows.append("%s\t%s\t%s" % (preset, name, t))
        print("%s: %d tensors" % (preset, len(types)), file=sys.stderr)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("# llama.cpp (llama-cpp-python %s) Q4_K_M tensor types for jllm-synth presets;\n" % llama_cpp.__version__)
        f.write("# written by scripts/golden/gen_synth_goldens.py. preset<TAB>tensor<TAB>type\n")
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
