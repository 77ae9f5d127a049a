#!/usr/bin/env bash
# scripts/test.sh — README command 2: configure, build, install the library and build
# examples/embed against it, run every test suite (ctest, the Python suites), a 2-minute soak of
# the server, the portability builds (aarch64 under qemu, g++-11, CUDA 12.6 for sm_87) and a
# 60-second fuzz smoke run of the GGUF reader. Logs each stage's time (docs/testing.md).
# Env: JOBS (default 2), FUZZ_SECONDS (default 60; 0 skips), SOAK_SECONDS (default 120),
# SKIP_STAGES (e.g. "aarch64 gcc11"; CI runs every stage), JLLM_CMAKE_ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-2}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
SOAK_SECONDS=${SOAK_SECONDS:-120}
SKIP_STAGES=${SKIP_STAGES:-}
skipped() { [[ " $SKIP_STAGES " == *" $1 "* ]] && echo "[test.sh] stage '$1' skipped (SKIP_STAGES)"; }
t_start=$(date +%s)
stage_t=$t_start
stage() {
  local now; now=$(date +%s)
  echo "[test.sh] stage '$1' took $((now - stage_t)) s (total $((now - t_start)) s)"
  stage_t=$now
}

scripts/deps.sh --portability
stage deps
scripts/fetch_model.sh smollm2 qwen2.5-0.5b qwen2.5-1.5b
stage model
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${JLLM_CMAKE_ARGS:-} >/dev/null
cmake --build build -j"$JOBS"
stage build
# The library as a consumer sees it: installed into a prefix, examples/embed built against it with
# find_package(jllm) and with pkg-config, each answering a question on the real Qwen2.5 model.
rm -rf build/install build/embed
cmake --install build --prefix "$PWD/build/install" >/dev/null
cmake -S examples/embed -B build/embed -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/embed >/dev/null
PKG_CONFIG_PATH="$PWD/build/install/lib/pkgconfig" \
  c++ -std=c++17 -O2 examples/embed/main.cpp \
  $(PKG_CONFIG_PATH="$PWD/build/install/lib/pkgconfig" pkg-config --cflags --libs jllm) -o build/embed/embed-pc
for exe in build/embed/embed build/embed/embed-pc; do
  answer=$("$exe" models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf "What is the capital of France?" 2>/dev/null)
  echo "[test.sh] $exe: $answer"
  grep -q Paris <<<"$answer" || { echo "[test.sh] $exe did not answer Paris" >&2; exit 1; }
done
stage install
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
if ! skipped soak && [ "$SOAK_SECONDS" != 0 ]; then
  # The server under the home-assistant mix (scripts/soak.sh; the report in build/soak/).
  scripts/soak.sh models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf --duration "$SOAK_SECONDS" \
    --cache-ram 16 --out build/soak > build/soak.log 2>&1 || { cat build/soak.log; exit 1; }
  sed -n '/^# Soak report/,/^| all (mix)/p' build/soak.log
  stage soak
fi
if ! skipped aarch64; then
  if [ "$(uname -m)" = x86_64 ]; then
    scripts/cross_test.sh "$JOBS"
  else
    echo "[test.sh] on $(uname -m) the unit suites above ran natively; no cross-build"
  fi
  stage aarch64
fi
if ! skipped gcc11; then
  # JetPack 6's compiler: the whole tree but the CUDA files (stage cuda126 has those), -Werror.
  CC=gcc-11 CXX=g++-11 cmake -S . -B build-gcc11 -G Ninja -DCMAKE_BUILD_TYPE=Release -DJLLM_CUDA=OFF \
    -DCMAKE_C_FLAGS=-Werror -DCMAKE_CXX_FLAGS=-Werror >/dev/null
  cmake --build build-gcc11 -j"$JOBS"
  stage gcc11
fi
if ! skipped cuda126 && command -v nvcc >/dev/null; then
  scripts/check_cuda126.sh "$JOBS"
  stage cuda126
fi
if [ "$FUZZ_SECONDS" != 0 ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DJLLM_FUZZ=ON -DJLLM_CUDA=OFF -DJLLM_SANITIZE=address,undefined >/dev/null
  cmake --build build-fuzz -j"$JOBS" --target fuzz_gguf
  scripts/fuzz.sh build-fuzz "$FUZZ_SECONDS"
  stage fuzz
fi
echo "[test.sh] all stages passed in $(( $(date +%s) - t_start )) s"
