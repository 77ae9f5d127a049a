#!/usr/bin/env bash
# scripts/test.sh — README command 2: configure, build and run every test suite (ctest, Python
# golden checks) and a 60-second fuzz smoke run of the GGUF reader. Logs each stage's time.
# Env: JOBS (default 2), FUZZ_SECONDS (default 60; 0 skips), JLLM_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
t_start=$(date +%s)
stage_t=$t_start
stage() {
  local now; now=$(date +%s)
  echo "[test.sh] stage '$1' took $((now - stage_t)) s (total $((now - t_start)) s)"
  stage_t=$now
}

scripts/deps.sh
stage deps
scripts/fetch_model.sh smollm2 qwen2.5-0.5b
stage model
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${JLLM_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$JOBS"
stage build
export JLLM_REQUIRE_MODELS=1
(cd build && ctest --output-on-failure -j"$JOBS" -LE cuda)
# The CUDA suites' tests that need no GPU: the kernels' decoders compiled for the host, and the
# GPU's step sequence run with the kernels' CPU twins against the CPU backend (tiny models and
# the real SmolLM2). The rest of the `cuda` label runs on the GPU machine (scripts/gpu/run.sh).
(cd build && ctest --output-on-failure -j"$JOBS" -L cuda -R 'CudaModelTwins|OnHost')
stage ctest
if [ -d tests/python ] && ls tests/python/test_*.py >/dev/null 2>&1; then
  python3 -m pytest -q tests/python
  stage pytest
fi
if [ "$FUZZ_SECONDS" != 0 ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DJLLM_FUZZ=ON -DJLLM_CUDA=OFF -DJLLM_SANITIZE=address,undefined >/dev/null
  cmake --build build-fuzz -j"$JOBS" --target fuzz_gguf
  scripts/fuzz.sh build-fuzz "$FUZZ_SECONDS"
  stage fuzz
fi
echo "[test.sh] all stages passed in $(( $(date +%s) - t_start )) s"
