#!/usr/bin/env bash
# scripts/gpu/pack_bins.sh NAME [TARGET...] — here (the build machine, no GPU): builds the targets
# for SM 9.0 only in $JLLM_PACK_BUILD (default build-cuda; configured with -DJLLM_CUDA=ON
# -DJLLM_CUDA_ARCHS=90 -DJLLM_BUILD_SERVER=OFF when missing), strips copies of the programs and
# packs them as gpu-pack/bin-NAME.tar.xz with a MANIFEST (commit, whether the tree had changes,
# the targets, the build's source folder). On the GPU machine, scripts/gpu/unpack_bins.sh NAME
# unpacks them; a call then needs no build there (a build takes 3-4 minutes of device time).
# Default targets: jllm-bench jllm-synth. Each program is ~10 MB packed; a call carries at most
# 64 MiB with the tree (~19 MB) and the .debs (~2.5 MB).
set -euo pipefail
name=${1:?usage: scripts/gpu/pack_bins.sh NAME [TARGET...]}
shift
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(jllm-bench jllm-synth)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build=${JLLM_PACK_BUILD:-build-cuda}
if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DJLLM_CUDA=ON -DJLLM_CUDA_ARCHS=90 \
        -DJLLM_BUILD_SERVER=OFF
fi
grep -q '^JLLM_CUDA_ARCHS:STRING=90$' "$build/CMakeCache.txt" ||
    { echo "pack_bins: $build is not an SM 9.0 build (JLLM_CUDA_ARCHS)" >&2; exit 1; }
cmake --build "$build" -j2 --target "${targets[@]}"
stage=$(mktemp -d)
paths=()  # MANIFEST lines "path PROGRAM PATH-IN-THE-BUILD"
trap 'rm -rf "$stage"' EXIT
for t in "${targets[@]}"; do
    f=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
    [[ -n "$f" ]] || { echo "pack_bins: no program $t in $build" >&2; exit 1; }
    cp "$f" "$stage/$t" && strip "$stage/$t"
    paths+=("path $t ${f#"$build"/}")
done
{
    echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!gpu-pack' || echo ' (with uncommitted changes)')"
    echo "targets ${targets[*]}"
    echo "source_dir $root"
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    printf '%s\n' "${paths[@]}"
} > "$stage/MANIFEST"
mkdir -p gpu-pack
tar -cJf "gpu-pack/bin-$name.tar.xz" -C "$stage" .
echo "gpu-pack/bin-$name.tar.xz: $(du -h "gpu-pack/bin-$name.tar.xz" | cut -f1) ($(head -1 "$stage/MANIFEST"))"
