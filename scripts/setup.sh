#!/usr/bin/env bash
# scripts/setup.sh — README command 1: install dependencies (Debian/Ubuntu packages, as root),
# build (Release, CUDA auto-detected), and fetch the default model into models/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
JOBS=${JOBS:-2}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${JLLM_CMAKE_ARGS:-}
cmake --build build -j"$JOBS"
scripts/fetch_model.sh
echo "[setup] done: ./build/jetson-llm -m models/SmolLM2-135M-Instruct.Q4_1.gguf -p \"Hello\""
