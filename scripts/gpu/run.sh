#!/usr/bin/env bash
# scripts/gpu/run.sh OUTDIR [STEP...] — runs on the GPU test machine (Ubuntu 24.04, CUDA 13, no
# network) from the repository root, with gpu-pack/ (scripts/gpu/prepare.sh) carried along.
# Steps (default: build test sanitize; JLLM_GPU_TARGETS limits what `build` builds, e.g.
# "jetson-llm jllm-bench jllm-synth jllm-bench-kernels test_cuda_ops test_cuda_model"):
#   build     unpack the .debs into a private prefix, configure for SM 9.0 without the server,
#             build with ninja (the build folder is reused by later calls)
#   test      ctest -L cuda, then the model test again with JLLM_CUDA_SYNC_CHECK=1 and the
#             per-layer error table
#   sanitize  compute-sanitizer memcheck and racecheck on test_cuda_ops, and on a 16-token
#             generation of the real model when JLLM_GPU_MODEL is set (unpack_pack.sh sets it)
#   unit      ctest -L unit (the CPU-side suite, on this machine's compiler)
# JLLM_GPU_TEST_FILTER limits what the test steps run: a gtest filter (positive patterns, then
# optionally '-' and negative ones, each ':'-separated, * and ? as wildcards), e.g.
# 'CudaOps.Attention*:CudaModel.*' or 'CudaOps.*-CudaOps.TopK*'. It goes as --gtest_filter to the
# programs run directly (the model test's second run, compute-sanitizer on test_cuda_ops; the
# generation under compute-sanitizer is not a test and still runs) and, as the same patterns in
# regexes (ctest names the tests Suite.Test), as -R / -E to ctest -L cuda and ctest -L unit.
# Logs go to OUTDIR; a short summary is printed last. Split the steps over several calls when
# one call's time is limited.
set -uo pipefail

outdir=${1:?usage: scripts/gpu/run.sh OUTDIR [build|test|sanitize|unit]...}
shift
steps=" ${*:-build test sanitize} "
want() { [[ "$steps" == *" $1 "* ]]; }
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
prefix=${JLLM_GPU_PREFIX:-/tmp/jllm-deps}
build=${JLLM_GPU_BUILD:-build-gpu}
jobs=${JLLM_GPU_JOBS:-16}
summary=()
note() { summary+=("$1"); echo "== $1"; }

# ---- the test filter: --gtest_filter for the programs, -R / -E regexes for ctest
glob_regex() {  # gtest patterns 'A.*:B?' -> '^(A\..*|B.)$' (nothing for no patterns)
    local pats p out=
    IFS=: read -r -a pats <<< "$1"
    for p in "${pats[@]}"; do
        [[ -n "$p" ]] || continue
        p=$(sed -e 's/[][\\.^$+(){}|]/\\&/g' -e 's/\*/.*/g' -e 's/?/./g' <<< "$p")
        out+="${out:+|}$p"
    done
    [[ -z "$out" ]] || echo "^($out)\$"
}
filter=${JLLM_GPU_TEST_FILTER:-}
gtest_sel=()
ctest_sel=()
if [[ -n "$filter" ]]; then
    gtest_sel=(--gtest_filter="$filter")
    positive=${filter%%-*}
    negative=
    [[ "$filter" == *-* ]] && negative=${filter#*-}
    re=$(glob_regex "$positive")
    [[ -z "$re" ]] || ctest_sel+=(-R "$re")
    re=$(glob_regex "$negative")
    [[ -z "$re" ]] || ctest_sel+=(-E "$re")
    note "test filter: $filter (ctest ${ctest_sel[*]})"
fi

rc_cuda=0
# ---- unpack the carried .debs (every call: the built programs load their libraries from here)
rm -rf "$prefix"
mkdir -p "$prefix"
have_system() {  # package name -> 0 if the system already provides what it would
    case "$1" in
        libgtest-dev) [[ -e /usr/include/gtest/gtest.h ]] ;;
        nlohmann-json3-dev) [[ -e /usr/include/nlohmann/json.hpp ]] ;;
        libcli11-dev) [[ -e /usr/include/CLI/CLI.hpp ]] ;;
        *) return 1 ;;
    esac
}
n_deb=0
for deb in gpu-pack/debs/*.deb; do
    [[ -e "$deb" ]] || { note "no .debs in gpu-pack/debs (run scripts/gpu/prepare.sh first)"; break; }
    pkg=$(dpkg-deb -f "$deb" Package)
    if have_system "$pkg"; then
        echo "system has $pkg; not unpacking it"
        continue
    fi
    dpkg -x "$deb" "$prefix" && n_deb=$((n_deb + 1))
done
note "unpacked $n_deb .debs into $prefix"
# The tokenizer and the SmolLM2 cut come xz-packed (scripts/gpu/prepare.sh).
source scripts/gpu/unpack_pack.sh
note "real-model GPU test model: ${JLLM_GPU_MODEL:-none (JLLM_GPU_MODEL unset, no gpu-pack/smollm2-cut.gguf.xz)}"

{
    uname -a
    nvidia-smi || true
    nvcc --version || true
    cmake --version || true
    git log -1 --oneline || true
} > "$outdir/machine.txt" 2>&1

if want build; then
# ---- configure and build (CMAKE_POLICY_VERSION_MINIMUM: CMake 4 reading the packages' older
# config files; CMake 3 ignores it)
if cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DJLLM_DEPS_PREFIX="$prefix" \
        -DJLLM_CUDA=ON -DJLLM_CUDA_ARCHS=90 -DJLLM_BUILD_SERVER=OFF \
        -DCMAKE_POLICY_VERSION_MINIMUM=3.5 > "$outdir/configure.log" 2>&1; then
    note "configure: ok"
else
    note "configure: FAILED (see configure.log)"
    tail -30 "$outdir/configure.log"
    printf '%s\n' "---- summary" "${summary[@]}"
    exit 1
fi
# JLLM_GPU_TARGETS="a b ...": only those targets (and what they need) instead of everything; the
# CPU-side test programs are most of the build and the GPU machine does not run them.
targets=()
[[ -n "${JLLM_GPU_TARGETS:-}" ]] && read -r -a targets <<< "$JLLM_GPU_TARGETS"
if cmake --build "$build" -j"$jobs" ${targets[@]:+--target "${targets[@]}"} > "$outdir/build.log" 2>&1; then
    note "build: ok ($(grep -c -i 'warning' "$outdir/build.log") warning lines)"
else
    note "build: FAILED (see build.log)"
    grep -m 20 -i -B2 -A6 'error' "$outdir/build.log" | tail -60
    printf '%s\n' "---- summary" "${summary[@]}"
    exit 1
fi
fi  # build

# ---- tests
ctest_line() { grep -E 'tests passed|tests failed' "$1" | tail -1; }
if want test; then
(cd "$build" && ctest -L cuda ${ctest_sel[@]+"${ctest_sel[@]}"} --output-on-failure --timeout 900) \
    > "$outdir/ctest_cuda.log" 2>&1
rc_cuda=$?
note "ctest -L cuda: $(ctest_line "$outdir/ctest_cuda.log") (rc $rc_cuda)"
# Model test again with a synchronization after every launch and the per-layer error table.
JLLM_CUDA_SYNC_CHECK=1 JLLM_CUDA_MODEL_DUMP=1 "$build/tests/test_cuda_model" ${gtest_sel[@]+"${gtest_sel[@]}"} \
    > "$outdir/model_dump.log" 2>&1
note "test_cuda_model with JLLM_CUDA_SYNC_CHECK=1: rc $? (per-layer errors in model_dump.log)"
grep -E '^\[(twin )?(llama|qwen2|qwen3) ' "$outdir/model_dump.log" | sed 's/^/   /'
fi
if want unit; then
(cd "$build" && ctest -L unit -j8 ${ctest_sel[@]+"${ctest_sel[@]}"} --output-on-failure --timeout 900) \
    > "$outdir/ctest_unit.log" 2>&1
note "ctest -L unit: $(ctest_line "$outdir/ctest_unit.log") (rc $?)"
fi

# ---- compute-sanitizer (not available under every container runtime)
want sanitize && for tool in memcheck racecheck; do
    log="$outdir/sanitizer_$tool.log"
    if ! command -v compute-sanitizer > /dev/null; then
        note "compute-sanitizer $tool: not installed"
        continue
    fi
    timeout 900 compute-sanitizer --tool "$tool" --error-exitcode 99 "$build/tests/test_cuda_ops" \
        ${gtest_sel[@]+"${gtest_sel[@]}"} > "$log" 2>&1
    rc=$?
    if grep -q -E 'Device not supported|Target application returned an error|unable to initialize' "$log" && [[ $rc -ne 99 ]] &&
        ! grep -q -E '\[  PASSED  \]' "$log"; then
        note "compute-sanitizer $tool: could not run here (rc $rc, see $(basename "$log"))"
    else
        note "compute-sanitizer $tool: rc $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
    fi
    # One short generation on the real model (prefill GEMM path, the decode graph, GPU sampling).
    if [[ -n "${JLLM_GPU_MODEL:-}" && -x "$build/jetson-llm" ]]; then
        glog="$outdir/sanitizer_${tool}_generation.log"
        timeout 900 compute-sanitizer --tool "$tool" --error-exitcode 99 "$build/jetson-llm" -m "$JLLM_GPU_MODEL" \
            --device cuda --raw -p "The capital of France is a city that" -n 16 --temp 0.7 --top-k 40 --seed 1 \
            > "$glog" 2>&1
        note "compute-sanitizer $tool, 16-token generation: rc $?, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$glog" | tail -1)"
    fi
done

echo
echo "---- summary (logs in $outdir)"
printf '%s\n' "${summary[@]}"
[[ $rc_cuda -eq 0 ]]
