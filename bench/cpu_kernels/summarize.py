#!/usr/bin/env python3
"""Turns bench_cpu_kernels JSON (run with --benchmark_repetitions=N) into a markdown table:
weights GB/s and tokens/s from the fastest repetition of each benchmark (the one least
disturbed on a shared machine), next to the median. For 1-thread rows the last column
rescales the best repetition by its CPU time instead of wall time: what the kernel does while
it actually holds a core, which other jobs on the machine disturb much less.

    bench_cpu_kernels --benchmark_repetitions=5 --benchmark_format=json > out.json
    python3 bench/cpu_kernels/summarize.py out.json [more.json ...]   # best over all files
"""
import json
import re
import sys

TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 8: "Q8_0", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K"}


def main(paths):
    runs = {}
    for path in paths:
        for b in json.load(open(path))["benchmarks"]:
            if b.get("run_type") != "iteration":
                continue
            runs.setdefault(b["run_name"], []).append(b)
    print("| benchmark | threads | best GB/s | median GB/s | best tok/s | best GMAC/s | 1 thread, per CPU-second |")
    print("|---|---|---|---|---|---|---|")
    for name, reps in runs.items():
        best = max(reps, key=lambda r: r["bytes_per_second"])
        rates = sorted(r["bytes_per_second"] for r in reps)
        med = rates[len(rates) // 2]
        m = re.match(r"BM_matmul/type:(\d+)/n_in:(\d+)/n_out:(\d+)/n_tok:(\d+)/thr:(\d+)", name)
        if m:
            t, n_in, n_out, n_tok, thr = (int(x) for x in m.groups())
            label = f"{TYPES.get(t, t)} [{n_out}, {n_in}], {n_tok} tok"
        elif name.startswith("BM_qwen3"):
            m = re.match(r"BM_qwen3_0p6b_matmuls/n_tok:(\d+)/thr:(\d+)", name)
            n_tok, thr = (int(x) for x in m.groups())
            label = f"qwen3-0.6b Q4_K_M, all matmuls, {n_tok} tok"
        else:
            m = re.match(r"BM_read_bandwidth/thr:(\d+)", name)
            thr = int(m.group(1)) if m else 0
            label = "read bandwidth (256 MiB sum)"
        tok = best.get("tok/s")
        tok_s = f"{tok:,.0f}" if tok else "-"
        mac = best.get("GMAC/s")
        mac_s = f"{mac:.1f}" if mac else "-"
        cpu_s = "-"
        if thr == 1 and best.get("cpu_time"):
            f = best["real_time"] / best["cpu_time"]
            cpu_s = f"{best['bytes_per_second'] * f / 1e9:.1f}"
            if tok:
                cpu_s += f", {tok * f:,.0f} tok/s"
            if mac:
                cpu_s += f", {mac * f:.0f} GMAC/s"
        print(f"| {label} | {thr} | {best['bytes_per_second'] / 1e9:.1f} | {med / 1e9:.1f} | {tok_s} | {mac_s} | {cpu_s} |")


if __name__ == "__main__":
    main(sys.argv[1:])
