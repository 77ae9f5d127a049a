#!/usr/bin/env bash
# scripts/gpu/kl.sh OUTDIR — on the GPU machine, after `scripts/gpu/run.sh OUTDIR build` built
# jllm-perplexity and jllm-synth (JLLM_GPU_TARGETS="jllm-perplexity jllm-synth" is enough): the
# CUDA backend's next-token distributions against the CPU backend's, same binary, same machine,
# on the SmolLM2 cut of gpu-pack/ (real weights) and a synthetic qwen3 model (JLLM_KL_PRESET,
# default qwen3-0.6b, q4_k_m, seed 42), INT8 and FP16 KV, JLLM_KL_CHUNKS (8) chunks of 512 of
# tests/data/text/perplexity.txt: the CPU run saves its logits (--save-logits), the CUDA run
# compares (--kl-base). Writes OUTDIR/kl-MODEL-KV.json, the logs, and OUTDIR/kl.md (the table of
# docs/fidelity.md).
set -euo pipefail
out=${1:?usage: scripts/gpu/kl.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
source scripts/gpu/unpack_pack.sh
build=${JLLM_GPU_BUILD:-build-gpu}
ppl=$build/apps/perplexity/jllm-perplexity
synth=$build/apps/synth/jllm-synth
chunks=${JLLM_KL_CHUNKS:-8}
preset=${JLLM_KL_PRESET:-qwen3-0.6b}
text=tests/data/text/perplexity.txt
threads=$(nproc)

models=()
[[ -n "${JLLM_GPU_MODEL:-}" ]] && models+=("smollm2-cut=$JLLM_GPU_MODEL")
syn=/tmp/jllm-models/$preset-q4_k_m.gguf
if [[ ! -f "$syn" ]]; then
    mkdir -p /tmp/jllm-models
    tok=()
    [[ -d gpu-pack/tokenizers/qwen3 ]] && tok=(--tokenizer-dir gpu-pack/tokenizers)
    "$synth" --preset "$preset" --quant q4_k_m --seed 42 "${tok[@]}" -o "$syn" -q
fi
models+=("$preset=$syn")

for entry in "${models[@]}"; do
    name=${entry%%=*}
    file=${entry#*=}
    for kv in int8 fp16; do
        base=/tmp/kl-$name-$kv.kld
        echo "== $name $kv: CPU reference ($threads threads)"
        "$ppl" -m "$file" -f "$text" --chunks "$chunks" --device cpu -t "$threads" --kv-type "$kv" \
            --save-logits "$base" > "$out/kl-$name-$kv-cpu.log" 2>&1 || { tail -5 "$out/kl-$name-$kv-cpu.log"; exit 1; }
        echo "== $name $kv: CUDA against it"
        "$ppl" -m "$file" -f "$text" --device cuda --kv-type "$kv" --kl-base "$base" \
            --json "$out/kl-$name-$kv.json" > "$out/kl-$name-$kv-cuda.log" 2>&1 ||
            { tail -5 "$out/kl-$name-$kv-cuda.log"; exit 1; }
        tail -4 "$out/kl-$name-$kv-cuda.log"
    done
done

python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
rows = ["| model | KV | PPL CPU | PPL CUDA | ratio | KL mean | KL p99 | KL max | top-1 |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
for f in sorted(glob.glob(os.path.join(out, "kl-*.json"))):
    j = json.load(open(f)); b = j["base"]
    name = os.path.basename(f)[3:-5].rsplit("-", 1)[0]
    rows.append("| %s | %s | %.4f | %.4f | %.5f | %.6f | %.5f | %.4f | %.2f%% |" % (
        name, j["kv_type"], b["ppl"], j["ppl"], b["ppl_ratio"], b["kl_mean"], b["kl_p99"], b["kl_max"],
        100 * b["top1_agreement"]))
open(os.path.join(out, "kl.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
