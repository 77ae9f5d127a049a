#!/usr/bin/env bash
# scripts/gpu/ab.sh OUTDIR DIFF [ROUNDS] [-- JLLM-BENCH ARGS...] — runs on the GPU machine from the
# repository root, after scripts/gpu/run.sh built jllm-bench there: an A/B of this tree ("new")
# against this tree with DIFF reversed ("base"), one jllm-bench binary each, run one after the
# other ROUNDS times (default 2) with the same arguments, so both sides' numbers come from one
# machine in one call. Make DIFF on the development machine, e.g.
#   git diff BASE -- src > gpu-pack/ab.diff        (gpu-pack/ is carried, not committed)
# The tree is restored after the base build and built again, so the build folder holds this
# tree's objects when ab.sh ends (a later call's upload keeps the files' own times, which would
# make the base's objects look current). Every run goes to OUTDIR/ab.log as it
# is written (the table rows also to stdout), the base build's log to OUTDIR/base-build.log.
# Environment: JLLM_GPU_BUILD (build folder, default build-gpu), JLLM_GPU_JOBS (16),
# JLLM_GPU_PREFIX (run.sh's .deb prefix, /tmp/jllm-deps).
set -uo pipefail

usage="usage: scripts/gpu/ab.sh OUTDIR DIFF [ROUNDS] [-- jllm-bench args...]"
outdir=${1:?$usage}
diff=${2:?$usage}
shift 2
rounds=2
if [[ "${1:-}" =~ ^[0-9]+$ ]]; then
    rounds=$1
    shift
fi
[[ "${1:-}" == "--" ]] && shift
[[ $# -gt 0 ]] || { echo "$usage (no jllm-bench arguments)" >&2; exit 2; }
[[ -f "$diff" ]] || { echo "ab.sh: no diff at $diff" >&2; exit 2; }
mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
diff=$(cd "$(dirname "$diff")" && pwd)/$(basename "$diff")
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
build=${JLLM_GPU_BUILD:-build-gpu}
jobs=${JLLM_GPU_JOBS:-16}
prefix=${JLLM_GPU_PREFIX:-/tmp/jllm-deps}
bench="$build/apps/bench/jllm-bench"
[[ -x "$bench" ]] || { echo "ab.sh: no $bench (run scripts/gpu/run.sh OUTDIR build first)" >&2; exit 1; }
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
cp "$bench" "$bins/new"
if ! patch --dry-run -R -p1 < "$diff" > /dev/null; then
    echo "ab.sh: $diff does not reverse-apply to this tree" >&2
    exit 1
fi
patch -R -p1 < "$diff" > /dev/null
cmake --build "$build" -j"$jobs" --target jllm-bench > "$outdir/base-build.log" 2>&1
rc=$?
[[ $rc -eq 0 ]] && cp "$bench" "$bins/base"
patch -p1 < "$diff" > /dev/null  # the tree as it came
if [[ $rc -ne 0 ]]; then
    echo "ab.sh: the base build failed (see $outdir/base-build.log)" >&2
    tail -20 "$outdir/base-build.log" >&2
    exit 1
fi
# The build folder back to the tree's objects now: the device tool's next call copies the tree
# with its own (older) times, so the base's objects would look newer than their sources there and
# the next build would keep them.
cmake --build "$build" -j"$jobs" --target jllm-bench > "$outdir/restore-build.log" 2>&1 ||
    echo "ab.sh: rebuilding the tree after the base failed (see $outdir/restore-build.log)" >&2

status=0
for ((r = 1; r <= rounds; r++)); do
    for side in new base; do
        echo "== $side, round $r: jllm-bench $*" | tee -a "$outdir/ab.log"
        "$bins/$side" "$@" >> "$outdir/ab.log" 2>&1 || { echo "   $side failed (rc $?)"; status=1; }
        # the table rows of this run (the log's tail since its header line)
        awk -v h="== $side, round $r:" 'index($0, h) == 1 {on = 1; next} on && /^\|/' "$outdir/ab.log"
    done
done
exit $status
