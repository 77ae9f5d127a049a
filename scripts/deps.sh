#!/usr/bin/env bash
# scripts/deps.sh [--portability] — installs every build and test dependency from Debian/Ubuntu
# packages and PyPI. Idempotent; needs root (or sudo) for apt-get. Nothing else is downloaded.
# --portability adds what scripts/test.sh's portability stages need (docs/testing.md): g++-11,
# and on an x86_64 host the aarch64 cross compiler, qemu-user and the arm64 -dev packages
# (multiarch: `dpkg --add-architecture arm64`).
set -euo pipefail
PORTABILITY=0
[ "${1:-}" = "--portability" ] && PORTABILITY=1

APT_PKGS=(build-essential cmake ninja-build pkg-config git ca-certificates unzip
          python3 python3-pip
          libgtest-dev libgmock-dev libbenchmark-dev
          nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev libxxhash-dev
          libcpp-httplib-dev libsystemd-dev systemd clang iproute2 file)
PY_PKGS=(numpy gguf tokenizers jinja2 pytest openai ollama jsonschema matplotlib)
if [ "$PORTABILITY" = 1 ]; then
  APT_PKGS+=(g++-11)
  if [ "$(uname -m)" = x86_64 ]; then
    APT_PKGS+=(g++-aarch64-linux-gnu qemu-user libgtest-dev:arm64 libgmock-dev:arm64 libpcre2-dev:arm64
               libutf8proc-dev:arm64 libxxhash-dev:arm64)
  fi
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
if [ "$PORTABILITY" = 1 ] && [ "$(uname -m)" = x86_64 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "[deps] adding the arm64 architecture (multiarch) for the aarch64 cross-build"
  $SUDO dpkg --add-architecture arm64
fi

# Installed, for this machine's architecture (or arch-independent); `name:arch` as given.
installed() {
  local q=$1
  case "$q" in *:*) ;; *) dpkg-query -W -f='${Status}\n' "$q:$(dpkg --print-architecture)" 2>/dev/null |
                            grep -q "ok installed" && return 0 ;; esac
  dpkg-query -W -f='${Status}\n' "$q" 2>/dev/null | grep -q "ok installed"
}
missing=()
for p in "${APT_PKGS[@]}"; do
  installed "$p" || missing+=("$p")
done
# clang's sanitizer/libFuzzer runtime is a separate package on Debian 12.
if ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 &&
   ! ls /usr/lib/llvm-*/lib/clang/*/lib/*/libclang_rt.fuzzer*.a >/dev/null 2>&1; then
  missing+=("__clang_rt__")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  pkgs=()
  for p in "${missing[@]}"; do [ "$p" != "__clang_rt__" ] && pkgs+=("$p"); done
  if [ ${#pkgs[@]} -gt 0 ]; then $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}"; fi
  if [[ " ${missing[*]} " == *" __clang_rt__ "* ]]; then
    cv=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1)
    $SUDO apt-get install -y -qq --no-install-recommends "libclang-rt-${cv}-dev" ||
      $SUDO apt-get install -y -qq --no-install-recommends libclang-rt-dev || true
  fi
else
  echo "[deps] all Debian packages present"
fi

py_missing=()
for p in "${PY_PKGS[@]}"; do
  python3 -m pip show -q "$p" >/dev/null 2>&1 || py_missing+=("$p")
done
if [ ${#py_missing[@]} -gt 0 ]; then
  echo "[deps] pip installing: ${py_missing[*]}"
  python3 -m pip install -q "${py_missing[@]}" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "${py_missing[@]}"
else
  echo "[deps] all Python packages present"
fi
