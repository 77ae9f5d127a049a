#!/usr/bin/env bash
# scripts/gpu/bench.sh OUTDIR — runs on the GPU test machine (Ubuntu 24.04, CUDA 13, no network)
# from the repository root, with gpu-pack/ carried. Our side of docs/performance.md's GPU table in
# one run (about 3-4 minutes on an H200 with 16 cores once built):
#   build     scripts/gpu/run.sh OUTDIR/build build (incremental; skip with JLLM_BENCH_SKIP_BUILD=1
#             when run.sh already ran in this session: its .deb prefix must exist)
#   info      date, commit, nvidia-smi (name, driver, memory; clocks before and after)
#   kernels   jllm-bench-kernels: device copy bandwidth, decode GEMV GB/s per weight type
#   gemm      jllm-bench-kernels --ntok 512 on qwen3-4b's Q4_K matrices: the int8 and the fp16
#             prefill GEMM on the same matrices, TOPS and TFLOPS (issue 38's ratio gate)
#   synth     qwen3-0.6b and qwen3-4b q4_k_m (seed 42) into $JLLM_BENCH_MODELS (default
#             /tmp/jllm-models), reused when present
#   bench     jllm-bench --device cuda per model: -p 33,512 -n 128 -r 5 (tg128 after the prefill
#             tests in one process, as a request runs), -p 0 -n 128 -r 5 (tg128 in a process of its
#             own, as llama-bench runs each test), then -d 4096 -p 0 -n 128 -r 3, with the measured
#             copy bandwidth as the reference (--bw)
#   depth     qwen3-4b with 4,096 and 16,384 positions already cached: -p 33,512 -n 128
#             -d 4096,16384 -r 3, INT8 KV, then FP16 KV (JLLM_BENCH_DEPTH=0 leaves it out)
#   peer      with JLLM_BENCH_LLAMA=PATH (a llama-bench built with CUDA): after each of our runs
#             above but the tg-alone and -d 4096 ones, llama-bench -ngl 99 -fa 1 on the same file
#             and tests (-r 5; at depth with -ctk/-ctv q8_0 against our INT8 KV, f16 against our
#             FP16), so every ratio of the side-by-side table comes from this call
# Raw outputs and summary.md go to OUTDIR; the summary is printed last. A failing step is
# reported and the rest continue; the exit status is 1 if any step failed.
# Environment: JLLM_GPU_BUILD (build-gpu), JLLM_BENCH_MODELS, JLLM_BENCH_PRESETS (models, default
# "qwen3-0.6b qwen3-4b"), JLLM_BENCH_STEP_TIMEOUT (seconds per step, 240; the build:
# JLLM_BENCH_BUILD_TIMEOUT, 480), JLLM_BENCH_KERNEL_ARGS (extra jllm-bench-kernels flags),
# JLLM_BENCH_KERNELS=0 (no kernel step: ANCHORS.md's copy bandwidth is the reference),
# JLLM_BENCH_DEPTH, JLLM_BENCH_LLAMA, JLLM_TOKENIZER_DIR, JLLM_BENCH_COMMIT (when the copy has no
# .git).
set -uo pipefail

outdir=${1:?usage: scripts/gpu/bench.sh OUTDIR}
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
build=${JLLM_GPU_BUILD:-build-gpu}
export JLLM_GPU_BUILD=$build  # run.sh builds there
models=${JLLM_BENCH_MODELS:-/tmp/jllm-models}
limit=${JLLM_BENCH_STEP_TIMEOUT:-240}
step_limit=$limit
threads=$(nproc)
read -r -a presets <<< "${JLLM_BENCH_PRESETS:-qwen3-0.6b qwen3-4b}"
llama=${JLLM_BENCH_LLAMA:-}
if [[ -n "$llama" && ! -x "$llama" ]]; then
    echo "bench.sh: JLLM_BENCH_LLAMA=$llama is not an executable" >&2
    exit 2
fi
kern="$build/bench/cuda_kernels/jllm-bench-kernels"
bench="$build/apps/bench/jllm-bench"
synth="$build/apps/synth/jllm-synth"

# llama.cpp on the same GPU kind (shared/ANCHORS.md, H200 section: llama-bench -fa 1, f16 KV;
# the depth row: q8_0 KV, llama-bench average, -r 3).
declare -A anchor=(
    [qwen3-0.6b/pp33]=8744 [qwen3-0.6b/pp512]=38993 [qwen3-0.6b/tg128]=705
    [qwen3-4b/pp33]=4443 [qwen3-4b/pp512]=13800 [qwen3-4b/tg128]=318 ["qwen3-4b/tg128 @ d4096"]=242.9
)
ANCHOR_COPY_GBPS=4242

# Raw outputs of an earlier run in the same OUTDIR would pass for this run's where a step is skipped.
rm -f "$outdir"/bench-*.json "$outdir"/depth-*.json "$outdir"/peer-*.jsonl "$outdir"/kernels.md "$outdir"/kernels.json \
    "$outdir"/summary.md

steps=()  # rows of the steps table
failed=0
t_begin=$(date +%s.%N)
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
status_word() {
    case $1 in
        0) echo ok ;;
        124) echo "TIMED OUT (${step_limit} s)" ;;
        *) echo "FAILED (rc $1)" ;;
    esac
}
# run_step NAME STDOUT STDERR CMD... — one timed step under the per-step limit.
run_step() {
    local name=$1 out=$2 err=$3 t0 rc dt
    shift 3
    echo "== $name: $*"
    t0=$(date +%s.%N)
    timeout "$step_limit" "$@" > "$out" 2> "$err"
    rc=$?
    dt=$(elapsed "$t0")
    steps+=("| $name | $(status_word "$rc") | $dt |")
    echo "== $name: $(status_word "$rc"), $dt s"
    if [[ $rc -ne 0 ]]; then
        failed=1
        tail -n 8 "$err" | sed 's/^/   /'
    fi
    return "$rc"
}
skip_step() {  # NAME WHY
    steps+=("| $1 | skipped: $2 | 0 |")
    echo "== $1: skipped: $2"
    failed=1
}

# ---- build
if [[ "${JLLM_BENCH_SKIP_BUILD:-0}" == 1 ]]; then
    steps+=("| build | skipped (JLLM_BENCH_SKIP_BUILD=1) | 0 |")
else
    step_limit=${JLLM_BENCH_BUILD_TIMEOUT:-480}
    run_step build "$outdir/build.out" "$outdir/build.err" \
        scripts/gpu/run.sh "$outdir/build" build
    step_limit=$limit
    tail -n 4 "$outdir/build.out" | sed 's/^/   /'
fi

# ---- info
commit=${JLLM_BENCH_COMMIT:-$(git rev-parse HEAD 2> /dev/null)}
if [[ -z "$commit" && -r "$build/generated/jllm_version.h" ]]; then
    commit="$(sed -n 's/.*JLLM_GIT_COMMIT "\(.*\)"/\1/p' "$build/generated/jllm_version.h") (from the build)"
fi
commit=${commit:-unknown}
dirty=$(git status --short --untracked-files=no 2> /dev/null | wc -l)
date_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)
{
    echo "date: $date_utc"
    echo "commit: $commit ($dirty modified tracked files)"
    echo "host: $(uname -srm), $threads cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)"
} > "$outdir/info.txt"
run_step "nvidia-smi" "$outdir/nvidia-smi.csv" "$outdir/nvidia-smi.err" \
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
clock_query=clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,power.limit,temperature.gpu,pstate
nvidia-smi --query-gpu="$clock_query" --format=csv > "$outdir/clocks-before.csv" 2>&1
gpu_line=$(sed -n 2p "$outdir/nvidia-smi.csv")

# ---- kernels (first: its copy bandwidth is the reference of the model rows)
copy_bw=""
if [[ "${JLLM_BENCH_KERNELS:-1}" == 0 ]]; then
    steps+=("| kernels | skipped (JLLM_BENCH_KERNELS=0) | 0 |")
elif [[ -x "$kern" ]]; then
    # shellcheck disable=SC2086  # JLLM_BENCH_KERNEL_ARGS is a list of flags
    run_step kernels "$outdir/kernels.md" "$outdir/kernels.log" \
        "$kern" --json "$outdir/kernels.json" --ntok 1,4 ${JLLM_BENCH_KERNEL_ARGS:-}
    copy_bw=$(sed -n 's/.*device copy.*\*\*\([0-9.]*\) GB\/s\*\*.*/\1/p' "$outdir/kernels.md" | head -n 1)
    run_step gemm "$outdir/gemm.md" "$outdir/gemm.log" \
        "$kern" --json "$outdir/gemm.json" --types q4_k --ntok 512 --gemm int8,fp16 --no-large --no-sampling \
        --copy-gib 0.25 --reps 20
else
    skip_step kernels "$kern not built"
fi
# int8 TOPS over fp16 TFLOPS on the same matrices: their summed operations over their summed times.
gemm_ratio=""
[[ -s "$outdir/gemm.json" ]] && gemm_ratio=$(python3 - "$outdir/gemm.json" <<'PY'
import json, sys
cases = json.load(open(sys.argv[1]))["cases"]
t = {"int8": 0.0, "fp16": 0.0}
shapes = {c["shape"] for c in cases if c.get("gemm") == "int8"} & {c["shape"] for c in cases if c.get("gemm") == "fp16"}
for c in cases:
    if c.get("gemm") in t and c["shape"] in shapes:
        t[c["gemm"]] += c["us_median"]
if t["int8"] > 0 and t["fp16"] > 0:
    print("%.3f" % (t["fp16"] / t["int8"]))
PY
)
if [[ -n "$copy_bw" ]]; then
    bw=$copy_bw
    bw_note="$copy_bw GB/s, measured by jllm-bench-kernels in this run (ANCHORS.md: $ANCHOR_COPY_GBPS)"
else
    bw=$ANCHOR_COPY_GBPS
    bw_note="$ANCHOR_COPY_GBPS GB/s from ANCHORS.md (not measured in this run)"
fi

# ---- synth
tok_args=()
source scripts/gpu/unpack_pack.sh  # gpu-pack/tokenizers from its .tar.xz
for d in "${JLLM_TOKENIZER_DIR:-}" gpu-pack/tokenizers shared/testdata/tokenizers ../shared/testdata/tokenizers; do
    if [[ -n "$d" && -d "$d/qwen3" ]]; then
        tok_args=(--tokenizer-dir "$d")
        break
    fi
done
[[ ${#tok_args[@]} -eq 0 ]] && echo "== no tokenizer folder with qwen3/ found; jllm-synth uses its built-in default"
mkdir -p "$models"
declare -A model_file
for p in "${presets[@]}"; do
    f="$models/$p-q4_k_m.gguf"
    if [[ -s "$f" ]]; then
        steps+=("| synth $p | reused $f | 0 |")
        echo "== synth $p: reusing $f"
    elif [[ -x "$synth" ]]; then
        run_step "synth $p" "$outdir/synth-$p.out" "$outdir/synth-$p.log" \
            "$synth" --preset "$p" --quant q4_k_m --seed 42 "${tok_args[@]}" -t "$threads" -o "$f.part" &&
            mv "$f.part" "$f"
    else
        skip_step "synth $p" "$synth not built"
    fi
    [[ -s "$f" ]] && model_file[$p]=$f
done

# ---- models
for p in "${presets[@]}"; do
    if [[ -z "${model_file[$p]:-}" || ! -x "$bench" ]]; then
        skip_step "bench $p" "no model file or no jllm-bench"
        continue
    fi
    run_step "bench $p" "$outdir/bench-$p.json" "$outdir/bench-$p.log" \
        "$bench" --device cuda -m "${model_file[$p]}" -p 33,512 -n 128 -r 5 -o json --bw "$bw"
    [[ -n "$llama" ]] && run_step "peer $p" "$outdir/peer-$p.jsonl" "$outdir/peer-$p.log" \
        "$llama" -m "${model_file[$p]}" -ngl 99 -fa 1 -p 33,512 -n 128 -r 5 -o jsonl
    run_step "bench $p tg alone" "$outdir/bench-$p-tg.json" "$outdir/bench-$p-tg.log" \
        "$bench" --device cuda -m "${model_file[$p]}" -p 0 -n 128 -r 5 -o json --bw "$bw"
    # The depth run's process as nvidia-smi sees it (device memory with the CUDA context), sampled
    # every 0.1 s while it runs: the context is that peak minus the engine's own bytes. Where the
    # per-process list is empty (a container's PID namespace), the whole GPU's used memory, sampled
    # alongside from before the run starts, gives the same difference.
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits > "$outdir/gpu-$p-d4096.csv" 2> /dev/null
    ( while :; do
          nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits 2> /dev/null
          nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits >> "$outdir/gpu-$p-d4096.csv" 2> /dev/null
          sleep 0.1
      done ) > "$outdir/apps-$p-d4096.csv" &
    sampler=$!
    run_step "bench $p -d 4096" "$outdir/bench-$p-d4096.json" "$outdir/bench-$p-d4096.log" \
        "$bench" --device cuda -m "${model_file[$p]}" -d 4096 -p 0 -n 128 -r 3 -o json --bw "$bw"
    kill "$sampler" 2> /dev/null
    wait "$sampler" 2> /dev/null
done
# ---- depth: qwen3-4b at 4,096 and 16,384 cached positions, INT8 then FP16 KV, each followed by
# the peer's run with its like-for-like cache (q8_0, f16)
declare -A peer_kv=([int8]=q8_0 [fp16]=f16)
deep=${model_file[qwen3-4b]:-}
if [[ "${JLLM_BENCH_DEPTH:-1}" != 0 && -n "$deep" && -x "$bench" ]]; then
    for kv in int8 fp16; do
        run_step "depth qwen3-4b $kv" "$outdir/depth-$kv.json" "$outdir/depth-$kv.log" \
            "$bench" --device cuda -m "$deep" --kv-type "$kv" -p 33,512 -n 128 -d 4096,16384 -r 3 -o json --bw "$bw"
        [[ -n "$llama" ]] && run_step "peer depth ${peer_kv[$kv]}" "$outdir/peer-depth-$kv.jsonl" \
            "$outdir/peer-depth-$kv.log" "$llama" -m "$deep" -ngl 99 -fa 1 -ctk "${peer_kv[$kv]}" -ctv "${peer_kv[$kv]}" \
            -p 33,512 -n 128 -d 4096,16384 -r 5 -o jsonl
    done
elif [[ "${JLLM_BENCH_DEPTH:-1}" != 0 ]]; then
    skip_step "depth qwen3-4b" "no qwen3-4b file or no jllm-bench"
fi
nvidia-smi --query-gpu="$clock_query" --format=csv > "$outdir/clocks-after.csv" 2>&1

# ---- summary
# json_field FILE TEST KEY: a number from jllm-bench's JSON (one test object per line).
json_field() {
    [[ -s "$1" ]] || return 0
    grep -F "\"test\": \"$2\"" "$1" | head -n 1 | grep -o "\"$3\": [-0-9.eE+]*" | head -n 1 | awk '{ print $2 }'
}
fmt() { awk -v x="$1" -v f="$2" 'BEGIN { if (x == "") print "—"; else printf f, x }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "—"; else printf "%.2fx", a / b }'; }
model_rows() {
    local p=$1 json row test med lo hi gbps share
    for row in pp33 pp512 tg128 "tg128 alone" "tg128 @ d4096"; do
        json="$outdir/bench-$p.json"
        test=$row
        [[ $row == *d4096 ]] && json="$outdir/bench-$p-d4096.json"
        [[ $row == "tg128 alone" ]] && json="$outdir/bench-$p-tg.json" && test=tg128
        med=$(json_field "$json" "$test" tps_median)
        lo=$(json_field "$json" "$test" tps_min)
        hi=$(json_field "$json" "$test" tps_max)
        gbps=$(json_field "$json" "$test" effective_gbps)
        share=$(json_field "$json" "$test" bandwidth_share)
        echo "| $p q4_k_m | $row | $(fmt "$med" '%.1f') | $(fmt "$lo" '%.1f') .. $(fmt "$hi" '%.1f') |" \
            "$(fmt "$gbps" '%.0f') | $(awk -v s="$share" 'BEGIN { if (s == "") print "—"; else printf "%.1f%%", 100 * s }') |" \
            "$(fmt "${anchor[$p/$test]:-}" '%g') | $(ratio "$med" "${anchor[$p/$test]:-}") |"
    done
}
gate() {  # LABEL VALUE OP LIMIT
    awk -v l="$1" -v v="$2" -v op="$3" -v g="$4" 'BEGIN {
        if (v == "") { printf "- %s: not measured (gate %s %s)\n", l, op, g; exit }
        ok = (op == ">=") ? (v >= g) : (v <= g)
        printf "- %s: " (v < 10 ? "%.3f" : v < 100 ? "%.2f" : "%.1f") " (gate %s %s): %s\n", l, v, op, g, ok ? "met" : "NOT met" }'
}
tg0=$(json_field "$outdir/bench-qwen3-4b.json" tg128 tps_median)
tgd=$(json_field "$outdir/bench-qwen3-4b-d4096.json" "tg128 @ d4096" tps_median)
slow=$(awk -v a="$tg0" -v b="$tgd" 'BEGIN { if (a != "" && b != "" && a > 0) printf "%.1f", 100 * (1 - b / a) }')
{
    echo "# GPU benchmark (scripts/gpu/bench.sh), $date_utc"
    echo
    echo "- commit: $commit"
    echo "- GPU (nvidia-smi name, driver, memory): ${gpu_line:-unknown}"
    echo "- host: $(sed -n 's/^host: //p' "$outdir/info.txt")"
    echo "- reference bandwidth (device copy, read + write): $bw_note"
    sizes=()
    for p in "${presets[@]}"; do
        sizes+=("$p $(stat -c %s "${model_file[$p]:-/nonexistent}" 2> /dev/null || echo '?') bytes")
    done
    sizes_s=$(printf '%s; ' "${sizes[@]}")
    echo "- models: jllm-synth --preset P --quant q4_k_m --seed 42 in $models (${sizes_s%; })"
    echo "- commands: jllm-bench --device cuda -m FILE -p 33,512 -n 128 -r 5 -o json --bw $bw;" \
        "the same with -p 0 -n 128 (tg128 alone); jllm-bench --device cuda -m FILE -d 4096 -p 0 -n 128 -r 3 -o json" \
        "--bw $bw (INT8 KV, weights copied)"
    echo
    echo "## Models (tok/s, median of the repetitions after one warm-up)"
    echo
    echo "| model | test | ours | min .. max | eff. GB/s | % of copy bw | llama.cpp (ANCHORS.md) | ours / llama.cpp |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for p in "${presets[@]}"; do model_rows "$p"; done
    echo
    echo "llama.cpp: f16 KV, flash attention; its depth row is q8_0 KV (the INT8-KV counterpart)." \
        "tg128 runs after the pp33/pp512 tests in one process (as a request: a prefill first);" \
        "tg128 alone in a process of its own (llama-bench runs every test on a fresh context)."
    echo
    peer_note="not run (JLLM_BENCH_LLAMA unset)"
    [[ -n "$llama" ]] && peer_note="in this call: $llama"
    echo "## Side by side (llama.cpp $peer_note)"
    echo
    echo "ours: the runs above and the depth runs (-p 33,512 -n 128 -d 4096,16384 -r 3 --kv-type int8|fp16);" \
        "llama.cpp: llama-bench -ngl 99 -fa 1 -r 5 on the same files right after each of ours (at depth with" \
        "-ctk/-ctv q8_0 | f16); tok/s, the median of each side's repetitions (llama-bench's samples_ts)."
    echo
    echo "| model | test | KV (ours vs llama.cpp) | ours | llama.cpp | ours / llama.cpp |"
    echo "|---|---|---|---:|---:|---:|"
    for p in "${presets[@]}"; do
        [[ -s "$outdir/bench-$p.json" ]] &&
            python3 scripts/gpu/peer_rows.py "$p" "INT8 vs f16" "$outdir/bench-$p.json" "$outdir/peer-$p.jsonl"
    done
    for kv in int8 fp16; do
        [[ -s "$outdir/depth-$kv.json" ]] &&
            python3 scripts/gpu/peer_rows.py qwen3-4b "${kv^^} vs ${peer_kv[$kv]}" "$outdir/depth-$kv.json" \
                "$outdir/peer-depth-$kv.jsonl"
    done
    echo
    echo "## Issue-38 gates (qwen3-4b q4_k_m; ratios only where llama.cpp ran in this call)"
    echo
    peer_ratio() {  # OURS.json PEER.jsonl TEST: ours / llama.cpp's (3 decimals: the table's 2 would round a gate up), or nothing
        [[ -s "$1" && -s "$2" ]] || return 0
        python3 scripts/gpu/peer_rows.py m k "$1" "$2" | awk -F'|' -v t=" $3 " '$3 == t {
            o = $5; p = $6; gsub(/[ ,]/, "", o); gsub(/[ ,]/, "", p)
            if (p != "—" && p + 0 > 0) printf "%.3f\n", o / p }'
    }
    gate "pp512 @ d16384, INT8 vs q8_0, x llama.cpp" "$(peer_ratio "$outdir/depth-int8.json" "$outdir/peer-depth-int8.jsonl" "pp512 @ d16384")" ">=" 1.3
    gate "pp512 @ d4096, INT8 vs q8_0, x llama.cpp" "$(peer_ratio "$outdir/depth-int8.json" "$outdir/peer-depth-int8.jsonl" "pp512 @ d4096")" ">=" 1.3
    gate "tg128 @ d4096, FP16 vs f16, x llama.cpp" "$(peer_ratio "$outdir/depth-fp16.json" "$outdir/peer-depth-fp16.jsonl" "tg128 @ d4096")" ">=" 1.6
    gate "pp512 tok/s" "$(json_field "$outdir/bench-qwen3-4b.json" pp512 tps_median)" ">=" 20000
    gate "int8 GEMM TOPS / fp16 GEMM TFLOPS, qwen3-4b Q4_K matrices at 512 tokens" "$gemm_ratio" ">=" 1.6
    gate "tg128 tok/s" "$tg0" ">=" 850
    echo
    echo "## Issue-8 gates (qwen3-4b q4_k_m)"
    echo
    gate "tg128 tok/s" "$tg0" ">=" 636
    gate "tg128 tok/s, alone" "$(json_field "$outdir/bench-qwen3-4b-tg.json" tg128 tps_median)" ">=" 636
    gate "pp512 tok/s" "$(json_field "$outdir/bench-qwen3-4b.json" pp512 tps_median)" ">=" 13800
    gate "pp33 tok/s" "$(json_field "$outdir/bench-qwen3-4b.json" pp33 tps_median)" ">=" 6700
    gate "tg128 slowdown at depth 4096, %" "$slow" "<=" 15
    # Device memory beyond the CUDA context against weights + KV (jllm-bench's "memory" object,
    # from the depth run: its context holds 4,096 + 128 positions).
    mem_json="$outdir/bench-qwen3-4b-d4096.json"
    mem_pct=""
    if [[ -s "$mem_json" ]]; then
        mem_pct=$(grep -o '"memory": {[^}]*}' "$mem_json" | head -n 1 | awk -F'[:,}]' '{
            for (i = 1; i <= NF; i++) { gsub(/[ "{]/, "", $i) }
            for (i = 1; i < NF; i++) v[$i] = $(i + 1)
            if (v["device_used"] + 0 >= 0 && v["weights"] + v["kv"] > 0)
                printf "%.1f", 100 * (v["device_used"] - v["weights"] - v["kv"]) / (v["weights"] + v["kv"]) }')
        grep -o '"memory": {[^}]*}' "$mem_json" | head -n 1 | sed 's/^/- depth run /'
    fi
    gate "device memory over weights + KV, %" "$mem_pct" "<=" 10
    # The CUDA context (not counted above): the depth run's peak in nvidia-smi's per-process
    # memory (MiB) minus the engine's device_used.
    ctx="" ctx_gpu="" peak="" gpu_rise=""
    used=""
    [[ -s "$mem_json" ]] &&
        used=$(grep -o '"device_used": *-\?[0-9]*' "$mem_json" | head -n 1 | grep -o -- '-\?[0-9]*$')
    if [[ -n "$used" ]] && (( used >= 0 )); then
        [[ -s "$outdir/apps-qwen3-4b-d4096.csv" ]] &&
            peak=$(awk -F', *' '$2 ~ /jllm-bench/ && $3 + 0 > m { m = $3 + 0 } END { if (m > 0) print m }' \
                "$outdir/apps-qwen3-4b-d4096.csv")
        [[ -n "$peak" ]] && ctx=$(awk -v p="$peak" -v u="$used" 'BEGIN { printf "%.1f", p - u / 1048576 }')
        # The GPU's used memory: its peak during the run minus the sample taken before it started.
        [[ -s "$outdir/gpu-qwen3-4b-d4096.csv" ]] &&
            gpu_rise=$(awk 'NR == 1 { b = $1 + 0 } $1 + 0 > m { m = $1 + 0 } END { if (NR > 1 && m > b) print m - b }' \
                "$outdir/gpu-qwen3-4b-d4096.csv")
        [[ -n "$gpu_rise" ]] && ctx_gpu=$(awk -v p="$gpu_rise" -v u="$used" 'BEGIN { printf "%.1f", p - u / 1048576 }')
    fi
    echo "- CUDA context (the depth run's peak device memory in nvidia-smi's process list, ${peak:-?} MiB, minus the engine's device_used): ${ctx:-unknown} MiB"
    echo "- CUDA context (the GPU's used memory: the depth run's peak rise, ${gpu_rise:-?} MiB, minus the engine's device_used): ${ctx_gpu:-unknown} MiB"
    # jllm-bench-kernels' own context, at the driver's stack limit and at the engine's.
    [[ -s "$outdir/kernels.md" ]] && grep -E '^- CUDA context' "$outdir/kernels.md" | sed 's/^- /- jllm-bench-kernels: /'
    echo
    echo "## Decode GEMV (jllm-bench-kernels, n_tok 1; every row and n_tok 4 in kernels.md)"
    echo
    if [[ -s "$outdir/kernels.md" ]]; then
        grep -E '^- device copy' "$outdir/kernels.md"
        echo
        awk -F'|' '/^Sampling kernels/ { exit } /^\| type \|/ || /^\|---/ || ($6 + 0 == 1) { print }' "$outdir/kernels.md"
        echo
        grep -E '^qwen3-4b q4_k_m|^warning|FAILED' "$outdir/kernels.md"
        echo
        awk '/^Sampling kernels/ { f = 1; print; print ""; next } f && /^\|/ { print; t = 1; next } f && t { exit }' \
            "$outdir/kernels.md"
    else
        echo "(no kernel results)"
    fi
    echo
    echo "## Prefill GEMMs (jllm-bench-kernels --ntok 512 --gemm int8,fp16, qwen3-4b's Q4_K matrices; gemm.md)"
    echo
    if [[ -s "$outdir/gemm.md" ]]; then
        awk '/^Prefill GEMMs on the same matrix/ { f = 1; next } f && /^\|/ { print; t = 1; next } f && t { exit }' \
            "$outdir/gemm.md"
        grep -E 'FAILED' "$outdir/gemm.md"
    else
        echo "(no GEMM results)"
    fi
    echo
    echo "## Steps (seconds)"
    echo
    echo "| step | status | s |"
    echo "|---|---|---:|"
    printf '%s\n' "${steps[@]}"
    echo "| total | | $(elapsed "$t_begin") |"
    echo
    echo "Raw outputs in $outdir: info.txt, nvidia-smi.csv, clocks-{before,after}.csv, kernels.{md,json,log},"
    echo "bench-*.json and .log, synth-*.log, build/ (run.sh logs)."
} > "$outdir/summary.md"

echo
cat "$outdir/summary.md"
exit "$failed"
