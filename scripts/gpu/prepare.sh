#!/usr/bin/env bash
# scripts/gpu/prepare.sh — runs on the development machine (Debian 12). Collects the .deb files
# the GPU test machine (Ubuntu 24.04, no network, no PCRE2 / utf8proc / xxhash / cpp-httplib)
# needs to build the project into gpu-pack/debs (git-ignored; carry it with the working tree),
# and checks that each shared library is a plain C library whose soname and glibc needs an
# Ubuntu 24.04 system (glibc 2.39) satisfies. scripts/gpu/run.sh unpacks them there with dpkg -x.
# Models are not part of the pack: the CUDA tests build their own tiny synthetic models.
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

# The Qwen3 tokenizer (11 MB) for jllm-synth there (scripts/gpu/bench.sh writes its models with it).
tok_src="${JLLM_TOKENIZER_DIR:-$root/../shared/testdata/tokenizers}/qwen3"
if [[ -d "$tok_src" ]]; then
    rm -rf "$root/gpu-pack/tokenizers/qwen3"
    mkdir -p "$root/gpu-pack/tokenizers"
    cp -r "$tok_src" "$root/gpu-pack/tokenizers/"
    echo "copied the qwen3 tokenizer into $root/gpu-pack/tokenizers ($(du -sh "$root/gpu-pack" | cut -f1) in gpu-pack)"
else
    echo "no tokenizer folder at $tok_src: bench.sh will look for one on the GPU machine" >&2
fi
exit $status
