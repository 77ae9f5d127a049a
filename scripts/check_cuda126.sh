#!/usr/bin/env bash
# scripts/check_cuda126.sh [JOBS] — the CUDA backend against JetPack 6's CUDA 12.6 for the Orin
# (sm_87), with gcc 11 as the host compiler, as JetPack 6 (Ubuntu 22.04) has them.
#
# PyPI's CUDA 12.6 wheels carry the runtime, CCCL and crt headers and ptxas, but not the nvcc
# driver or its front end (cicc, cudafe++), so the front end is this machine's nvcc (13.0) and
# everything version-bound is 12.6's:
#   1. every src/backend/cuda/*.cu compiles (host and device code; -Werror, g++-11 as host
#      compiler) against CUDA 12.6's runtime API, CCCL and (device pass) crt headers: an API,
#      type or intrinsic that 12.6 lacks fails here;
#   2. its device code, as PTX for compute_87, is assembled by CUDA 12.6's ptxas for sm_87 (the
#      PTX header is set to ISA 8.5, 12.6's newest): an instruction 12.6 cannot emit for the Orin
#      fails here.
# Wheels: nvidia-cuda-{nvcc,runtime,cccl}-cu12==12.6.* (SHA-256 checked by pip against PyPI's
# index), cached in ~/.cache/jllm/cuda-12.6. Needs nvcc (any version >= 12.6) and g++-11.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${1:-2}
CACHE=${JLLM_CUDA126_CACHE:-$HOME/.cache/jllm/cuda-12.6}
HOSTCXX=${JLLM_CUDA126_HOST_CXX:-g++-11}
command -v nvcc >/dev/null || { echo "check_cuda126: nvcc not found" >&2; exit 1; }
command -v "$HOSTCXX" >/dev/null || { echo "check_cuda126: $HOSTCXX not found (apt-get install g++-11)" >&2; exit 1; }

if [ ! -x "$CACHE/nvidia/cuda_nvcc/bin/ptxas" ]; then
  rm -rf "$CACHE" && mkdir -p "$CACHE/wheels"
  python3 -m pip download -q --no-deps -d "$CACHE/wheels" \
    "nvidia-cuda-nvcc-cu12==12.6.85" "nvidia-cuda-runtime-cu12==12.6.77" "nvidia-cuda-cccl-cu12==12.6.77"
  for w in "$CACHE"/wheels/*.whl; do python3 -m zipfile -e "$w" "$CACHE"; done
  chmod +x "$CACHE/nvidia/cuda_nvcc/bin/ptxas"
fi
N="$CACHE/nvidia"
PTXAS="$N/cuda_nvcc/bin/ptxas"
# (The version is read first: grep -q would stop reading early, and pipefail would count the
# writer's SIGPIPE as a failure.)
ptxas_version=$("$PTXAS" --version)
grep -q "release 12.6" <<<"$ptxas_version" || { echo "check_cuda126: $PTXAS is not CUDA 12.6" >&2; exit 1; }

OUT=build-cuda126
mkdir -p "$OUT/generated"
# The version header the sources include (configure_file's output, written here without CMake).
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
version=$(sed -n 's/^project(genie_ai_runtime VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
sed -e "s/@JLLM_GIT_COMMIT@/$commit/g" -e "s/@PROJECT_VERSION@/$version/g" \
  cmake/version.h.in > "$OUT/generated/jllm_version.h"
# The runtime API and CCCL headers are 12.6's in both passes. nvcc's own crt/ headers are tied
# to its front end for host code (the launch stubs it generates), so the host pass keeps the
# machine's; the device pass takes 12.6's (the device-side declarations).
INC=(-I"$N/cuda_runtime/include" -I"$N/cuda_cccl/include" -Isrc -Iinclude -I"$OUT/generated")
INC_DEV=(-I"$N/cuda_nvcc/include" "${INC[@]}")
FLAGS=(-std=c++17 -O3 --expt-relaxed-constexpr -DJLLM_CUDA=1 -ccbin "$HOSTCXX" -Werror all-warnings
       -Xcompiler=-Wall,-Wextra,-Werror)

check_one() {
  local cu=$1 base; base=$(basename "$cu" .cu)
  nvcc "${FLAGS[@]}" "${INC[@]}" -gencode arch=compute_87,code=compute_87 -c "$cu" -o "$OUT/$base.o" \
    > "$OUT/$base.log" 2>&1 || { echo "FAIL compile $cu"; cat "$OUT/$base.log"; return 1; }
  nvcc "${FLAGS[@]}" "${INC_DEV[@]}" -arch=compute_87 -ptx "$cu" -o "$OUT/$base.ptx" >> "$OUT/$base.log" 2>&1 ||
    { echo "FAIL ptx $cu"; cat "$OUT/$base.log"; return 1; }
  sed -i 's/^\.version [0-9.]*$/.version 8.5/' "$OUT/$base.ptx"
  "$PTXAS" -arch=sm_87 -O3 "$OUT/$base.ptx" -o "$OUT/$base.cubin" >> "$OUT/$base.log" 2>&1 ||
    { echo "FAIL ptxas-12.6 sm_87 $cu"; cat "$OUT/$base.log"; return 1; }
  echo "ok $cu"
}
export -f check_one
export OUT PTXAS HOSTCXX
export FLAGS_STR="${FLAGS[*]}" INC_STR="${INC[*]}" INC_DEV_STR="${INC_DEV[*]}"
fails=0
# shellcheck disable=SC2016
ls src/backend/cuda/*.cu | xargs -P "$JOBS" -I{} bash -c '
  read -r -a FLAGS <<<"$FLAGS_STR"; read -r -a INC <<<"$INC_STR"; read -r -a INC_DEV <<<"$INC_DEV_STR"
  check_one "$1"' _ {} > "$OUT/summary.txt" || fails=1
cat "$OUT/summary.txt"
n_ok=$(grep -c '^ok ' "$OUT/summary.txt" || true)
n_all=$(ls src/backend/cuda/*.cu | wc -l)
echo "[check_cuda126] $n_ok of $n_all CUDA files compile against CUDA 12.6 headers (host: $HOSTCXX) and assemble with 12.6 ptxas for sm_87"
[ "$fails" = 0 ] && [ "$n_ok" = "$n_all" ]
