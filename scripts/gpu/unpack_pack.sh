#!/usr/bin/env bash
# scripts/gpu/unpack_pack.sh — sourced by run.sh and bench.sh on the GPU machine, from the
# repository root: unpacks what scripts/gpu/prepare.sh packed with xz. Each call of the device
# tool replaces gpu-pack/, so this runs every time (a second or two).
#   gpu-pack/tokenizers.tar.xz   -> gpu-pack/tokenizers/qwen3 (jllm-synth's vocabulary)
#   gpu-pack/smollm2-cut.gguf.xz -> /tmp/jllm-models/smollm2-cut.gguf; exports JLLM_GPU_MODEL
#                                   (the real-model GPU test) unless it is set already
#   the tests read shared/testdata/tokenizers: without a shared/ beside the tree (the device
#   copies only the tree) JLLM_SHARED_DIR points at /tmp/jllm-shared, whose tokenizers are these
if [[ -f gpu-pack/tokenizers.tar.xz && ! -d gpu-pack/tokenizers/qwen3 ]]; then
    mkdir -p gpu-pack/tokenizers && tar -C gpu-pack/tokenizers -xJf gpu-pack/tokenizers.tar.xz
fi
if [[ -z "${JLLM_GPU_MODEL:-}" && -f gpu-pack/smollm2-cut.gguf.xz ]]; then
    JLLM_GPU_MODEL=/tmp/jllm-models/smollm2-cut.gguf
    if [[ ! -f "$JLLM_GPU_MODEL" ]]; then
        mkdir -p /tmp/jllm-models &&
            xz -dc gpu-pack/smollm2-cut.gguf.xz > "$JLLM_GPU_MODEL.part" && mv "$JLLM_GPU_MODEL.part" "$JLLM_GPU_MODEL"
    fi
fi
[[ -n "${JLLM_GPU_MODEL:-}" ]] && export JLLM_GPU_MODEL
if [[ -z "${JLLM_SHARED_DIR:-}" && ! -d ../shared/testdata/tokenizers/qwen3 && -d gpu-pack/tokenizers/qwen3 ]]; then
    mkdir -p /tmp/jllm-shared/testdata && ln -sfn "$PWD/gpu-pack/tokenizers" /tmp/jllm-shared/testdata/tokenizers
    export JLLM_SHARED_DIR=/tmp/jllm-shared JLLM_TOKENIZER_DIR="$PWD/gpu-pack/tokenizers"
fi
true
