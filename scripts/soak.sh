#!/usr/bin/env bash
# scripts/soak.sh MODEL [--iters N] [--tokens T] [--duration S] [more options: --help]
# Starts jetson-llm-server with MODEL and drives a home assistant's request mix on loopback,
# sampling RSS, open fds, threads, latency and temperature; passes when no request failed, RSS is
# flat after warm-up (< 1 MB/h), fds and threads are flat and memory comes back after bursts of
# large bodies. Reports: soak-out/soak.{json,md,png} (--out DIR). A running server instead:
# scripts/soak.sh --url http://127.0.0.1:8080 --pid PID. Exit 0 on pass, 1 on fail.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/soak.py "$@"
