#!/usr/bin/env bash
# scripts/fuzz.sh BUILD_DIR SECONDS — runs the GGUF reader fuzzer, seeded from the shared vocab
# GGUFs and the regression corpus. A crash leaves its input in fuzz-out/ and fails the run;
# commit such an input to tests/data/gguf_regressions/ (and its LIST) as a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
SECS=${2:-60}
SHARED=${JLLM_SHARED_DIR:-../shared}
mkdir -p fuzz-out/corpus fuzz-out/seeds
cp -f "$SHARED"/testdata/vocab/*.gguf fuzz-out/seeds/ 2>/dev/null || true
cp -f tests/data/gguf_regressions/*.gguf fuzz-out/seeds/ 2>/dev/null || true
if [ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  head -c 2000000 models/SmolLM2-135M-Instruct.Q4_1.gguf > fuzz-out/seeds/smollm2-head.gguf
fi
status=0
"$BUILD"/tests/fuzz/fuzz_gguf -max_total_time="$SECS" -max_len=1048576 -rss_limit_mb=2048 \
  -timeout=10 -print_final_stats=1 -artifact_prefix=fuzz-out/ fuzz-out/corpus fuzz-out/seeds \
  > fuzz-out/fuzz.log 2>&1 || status=$?
grep -E "^#[0-9]+ *DONE|ERROR|SUMMARY|stat::number_of_executed_units|stat::peak_rss" fuzz-out/fuzz.log | tail -20 || true
if [ "$status" != 0 ] || ls fuzz-out/crash-* fuzz-out/leak-* fuzz-out/timeout-* fuzz-out/oom-* >/dev/null 2>&1; then
  echo "[fuzz] FAILED: see fuzz-out/" >&2
  exit 1
fi
echo "[fuzz] no crash in ${SECS} s"
