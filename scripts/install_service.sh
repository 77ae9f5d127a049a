#!/usr/bin/env bash
# scripts/install_service.sh — installs jetson-llm-server as a systemd service (docs/deploy.md):
# the programs and the library under PREFIX (default /usr/local), the unit
# /etc/systemd/system/jetson-llm-server.service, the settings /etc/default/jetson-llm (kept when
# present), an API key file /etc/jetson-llm/api-keys (one random key when absent), the service
# user jetson-llm and its state folder /var/lib/jetson-llm (KV snapshots). Needs root and a
# finished build (scripts/setup.sh). Then enables and starts the service where systemd runs.
#   scripts/install_service.sh [--prefix P] [--model FILE] [--no-start]
#   scripts/install_service.sh --render DIR [--prefix P] [--model FILE]   unit + settings into DIR only
#   scripts/install_service.sh --uninstall [--purge]                      --purge: also settings and state
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=/usr/local
MODEL=""
RENDER=""
START=1
UNINSTALL=0
PURGE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --render) RENDER=$2; shift 2 ;;
    --no-start) START=0; shift ;;
    --uninstall) UNINSTALL=1; shift ;;
    --purge) PURGE=1; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "install_service: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
UNIT=jetson-llm-server.service
have_systemd() { [ -d /run/systemd/system ] && command -v systemctl >/dev/null; }

render() {  # render OUTDIR: the unit and the settings file, PREFIX and MODEL filled in
  local out=$1
  mkdir -p "$out"
  sed "s|@PREFIX@|$PREFIX|g" packaging/systemd/$UNIT.in > "$out/$UNIT"
  sed "s|@MODEL@|${MODEL:-/var/lib/jetson-llm/models/model.gguf}|g" packaging/systemd/jetson-llm.default.in > "$out/jetson-llm"
}

if [ -n "$RENDER" ]; then
  render "$RENDER"
  echo "install_service: rendered $RENDER/$UNIT and $RENDER/jetson-llm"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then echo "install_service: run as root (or with sudo)" >&2; exit 1; fi

if [ "$UNINSTALL" = 1 ]; then
  if have_systemd; then systemctl disable --now $UNIT 2>/dev/null || true; fi
  rm -f /etc/systemd/system/$UNIT
  for b in jetson-llm jetson-llm-server jllm-bench jllm-synth jllm-vocab; do rm -f "$PREFIX/bin/$b"; done
  rm -rf "$PREFIX/include/jllm" "$PREFIX/lib/cmake/jllm" "$PREFIX/share/doc/jetson-llm"
  rm -f "$PREFIX/lib/libjetson_llm_core.a" "$PREFIX/lib/pkgconfig/jllm.pc"
  if [ "$PURGE" = 1 ]; then
    rm -rf /etc/default/jetson-llm /etc/jetson-llm /var/lib/jetson-llm
    id jetson-llm >/dev/null 2>&1 && userdel jetson-llm || true
  fi
  if have_systemd; then systemctl daemon-reload; fi
  if [ "$PURGE" = 1 ]; then echo "install_service: removed, settings and state too"; else echo "install_service: removed (settings and state kept)"; fi
  exit 0
fi

[ -x build/apps/server/jetson-llm-server ] || { echo "install_service: build first (scripts/setup.sh)" >&2; exit 1; }
cmake --install build --prefix "$PREFIX" >/dev/null
install -D -m 0644 docs/deploy.md "$PREFIX/share/doc/jetson-llm/deploy.md"
if ! id jetson-llm >/dev/null 2>&1; then
  useradd --system --no-create-home --home-dir /var/lib/jetson-llm --shell /usr/sbin/nologin jetson-llm
fi
for g in video render; do getent group $g >/dev/null && usermod -a -G $g jetson-llm || true; done
install -d -o jetson-llm -g jetson-llm -m 0750 /var/lib/jetson-llm /var/lib/jetson-llm/kv /var/lib/jetson-llm/models
tmp=$(mktemp -d)
render "$tmp"
install -m 0644 "$tmp/$UNIT" /etc/systemd/system/$UNIT
if [ ! -f /etc/default/jetson-llm ]; then
  install -m 0644 "$tmp/jetson-llm" /etc/default/jetson-llm
else
  echo "install_service: kept /etc/default/jetson-llm (the new template: $tmp/jetson-llm)"
fi
install -d -m 0750 -g jetson-llm /etc/jetson-llm
if [ ! -f /etc/jetson-llm/api-keys ]; then
  umask 027
  head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > /etc/jetson-llm/api-keys
  echo >> /etc/jetson-llm/api-keys
  chgrp jetson-llm /etc/jetson-llm/api-keys
  echo "install_service: wrote a new API key to /etc/jetson-llm/api-keys"
fi
if [ -n "$MODEL" ] && [ ! -r "$MODEL" ]; then echo "install_service: warning: cannot read $MODEL" >&2; fi
if have_systemd; then
  systemctl daemon-reload
  if [ "$START" = 1 ]; then systemctl enable --now $UNIT && systemctl --no-pager status $UNIT | head -5; fi
else
  echo "install_service: systemd is not running here; installed, not started"
fi
echo "install_service: done (unit /etc/systemd/system/$UNIT, settings /etc/default/jetson-llm)"
