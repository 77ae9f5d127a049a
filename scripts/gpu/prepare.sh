#!/usr/bin/env bash
# scripts/gpu/prepare.sh — runs on the development machine (Debian 12). Collects the .deb files
# the GPU test machine (Ubuntu 24.04, no network, no PCRE2 / utf8proc / xxhash / cpp-httplib)
# needs to build the project into gpu-pack/debs (git-ignored; carry it with the working tree),
# and checks that each shared library is a plain C library whose soname and glibc needs an
# Ubuntu 24.04 system (glibc 2.39) satisfies. scripts/gpu/run.sh unpacks them there with dpkg -x.
# Models: the CUDA tests build their own tiny synthetic models; the SmolLM2 cut (below) serves
# the real-model comparison.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out="$root/gpu-pack/debs"
mkdir -p "$out"

# Required: the GPU machine lacks these. The -dev packages carry headers, .pc files and the
# unversioned .so links; the runtime packages the versioned libraries.
required=(libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
          libutf8proc-dev libutf8proc2
          libxxhash-dev libxxhash0
          libcpp-httplib-dev libcpp-httplib0.11)
# Fallbacks: unpacked there only where the system lacks them (run.sh checks).
optional=(libgtest-dev nlohmann-json3-dev libcli11-dev)

cd "$out"
rm -f ./*.deb
apt-get download "${required[@]}" "${optional[@]}"

# Soname and glibc check of every shared library in the pack.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for deb in ./*.deb; do dpkg -x "$deb" "$tmp"; done
status=0
echo "library                                  soname                 newest GLIBC needed"
while IFS= read -r lib; do
    soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
    glibc=$(objdump -T "$lib" | grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1)
    printf '%-40s %-22s %s\n' "${lib#"$tmp"/}" "${soname:-?}" "${glibc:-none}"
    ver=${glibc#GLIBC_2.}
    ver=${ver%%.*}
    if [[ -n "$glibc" && "$ver" -gt 39 ]]; then
        echo "  ^ needs a glibc newer than Ubuntu 24.04's 2.39" >&2
        status=1
    fi
done < <(find "$tmp" -type f -name '*.so*' | sort)
echo "packed $(ls ./*.deb | wc -l) .deb files into $out ($(du -sh . | cut -f1))"

# The Qwen3 tokenizer for jllm-synth there (scripts/gpu/bench.sh writes its models with it), as
# gpu-pack/tokenizers.tar.xz (1.4 MB instead of 11 MB; run.sh unpacks it).
tok_src="${JLLM_TOKENIZER_DIR:-$root/../shared/testdata/tokenizers}/qwen3"
rm -rf "$root/gpu-pack/tokenizers"
if [[ -d "$tok_src" ]]; then
    tar -C "$(dirname "$tok_src")" -cJf "$root/gpu-pack/tokenizers.tar.xz" qwen3
    echo "packed the qwen3 tokenizer into gpu-pack/tokenizers.tar.xz"
else
    echo "no tokenizer folder at $tok_src: bench.sh will look for one on the GPU machine" >&2
fi

# The real-model GPU test's model: SmolLM2 cut to its first JLLM_GPU_CUT_LAYERS (6) layers
# (jllm-synth --from), xz-packed (6 layers: 41 MB; 3: 27 MB; the tree, the .debs, the tokenizer
# and this must stay under the 64 MiB a run takes).
# run.sh unpacks it and runs the test with JLLM_GPU_MODEL. Needs a CPU build (build/) and the model.
smol="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
layers=${JLLM_GPU_CUT_LAYERS:-6}  # fewer when the tree grows: everything must stay under 64 MiB
synth="$root/build/apps/synth/jllm-synth"
rm -f "$root/gpu-pack/smollm2-6l.gguf.xz" "$root/gpu-pack/smollm2-cut.gguf.xz"
if [[ -f "$smol" && -x "$synth" ]]; then
    "$synth" --from "$smol" --layers "$layers" -o "$root/gpu-pack/smollm2-cut.gguf" -q
    xz -T2 -6 "$root/gpu-pack/smollm2-cut.gguf"
    echo "packed SmolLM2 cut to $layers layers into gpu-pack/smollm2-cut.gguf.xz"
else
    echo "no $smol or $synth: the real-model GPU test will be skipped there" >&2
fi
echo "gpu-pack: $(du -sh "$root/gpu-pack" | cut -f1)"
exit $status
