#!/usr/bin/env bash
# scripts/cross_test.sh [JOBS] — the library and its unit tests cross-built for aarch64 (the
# Jetson's CPU) with Debian's cross compiler, then run under qemu-user: the NEON kernels (both
# builds: with and without the Armv8.2-A dot product) against the scalar references, and every
# other unit suite on a 64-bit Arm target. Needs g++-aarch64-linux-gnu, qemu-user and the arm64
# -dev packages (scripts/deps.sh installs them). Build folder: build-aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-${JOBS:-2}}
for tool in aarch64-linux-gnu-g++ qemu-aarch64; do
  command -v "$tool" >/dev/null || { echo "cross_test: $tool not found (scripts/deps.sh installs it)" >&2; exit 1; }
done
cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DJLLM_CUDA=OFF -DJLLM_BUILD_SERVER=OFF -DJLLM_BUILD_BENCH=OFF >/dev/null
cmake --build build-aarch64 -j"$JOBS"
kind=$(file build-aarch64/tests/test_cpu_kernels)
grep -q "ARM aarch64" <<<"$kind" ||
  { echo "cross_test: the test binaries are not aarch64" >&2; exit 1; }
# Under qemu-user. Debian 12's qemu-user (7.2) hangs here at the first thread a guest program
# creates (before its clone call), so the suites that start threads (the thread pool, matmul and
# forward passes, engine, sessions, parity, synth) are built for aarch64 but not run; every
# single-threaded suite runs: the NEON kernels against the scalar references (both NEON builds,
# with and without the dot product), quant formats, GGUF, tokenizers, grammars, chat templates,
# the Jetson HAL's parsers, the memory budget. Each entry: binary and gtest filter.
SUITES=(
  "test_cpu_kernels:CpuFeatures.*:QuantDotExact.*:*QuantDot.*:*ActQuant.*:QuantDotNeon.*:SelectTopK.*"
  "test_cpu_attn:AttnDot.*"
  "test_quant:*"
  "test_gguf:*"
  "test_tokenizer:*-TokenizerThreads.*"
  "test_grammar:*"
  "test_chat:*"
  "test_jetson:*"
  "test_memory:MemInfo.*:MemoryBudget.*:MemoryPool.*:OomGuard.*:PoolArray.*"
)
QEMU=(qemu-aarch64 -L /usr/aarch64-linux-gnu)
fails=0
for spec in "${SUITES[@]}"; do
  bin=${spec%%:*}; filter=${spec#*:}
  log=build-aarch64/qemu_$bin.log
  t0=$(date +%s)
  if timeout 900 "${QEMU[@]}" "build-aarch64/tests/$bin" --gtest_filter="$filter" > "$log" 2>&1; then
    echo "[cross_test] $bin: $(grep -E '^\[  PASSED  \]' "$log") in $(( $(date +%s) - t0 )) s"
  else
    echo "[cross_test] $bin FAILED (exit $?; log $log):"; grep -E "FAILED|Failure" "$log" | head -20; fails=1
  fi
done
# The NEON cases ran: none skipped (the CPU qemu emulates has NEON and the dot product).
neon=$(grep -cE "^\[       OK \] .*(neon|QuantDotNeon)" build-aarch64/qemu_test_cpu_kernels.log || true)
if grep -qE "^\[  SKIPPED \] .*(neon|QuantDotNeon)" build-aarch64/qemu_test_cpu_kernels.log || [ "$neon" -lt 15 ]; then
  echo "[cross_test] NEON cases were skipped ($neon ran)" >&2; fails=1
fi
echo "[cross_test] $neon NEON kernel cases ran against the scalar references"
exit "$fails"
