#!/usr/bin/env python3
"""apps/bench/llama_cpp_bench.py — the llama.cpp side of docs/performance.md's comparisons:
the same tests as jllm-bench (ppN: prefill N random tokens into an empty cache, last-token
logits only; tgN: N single-token decode calls), timed through llama-cpp-python's bundled
llama.cpp with the same thread count, 1 warm-up + r measured repetitions, median and range.

Each rep: Llama.reset() (the next eval drops the cached positions), then Llama.eval(tokens)
for pp (one llama_decode per n_batch=512 tokens) or N calls of Llama.eval([token]) for tg. The
Python call overhead per decode step (~tens of microseconds) is included and is small next to
a CPU decode step of milliseconds.

usage: llama_cpp_bench.py -m FILE [-p 33,512] [-n 128] [-r 3] [-t 2] [--seed 1234] [-o md|json]
"""
import argparse
import json
import random
import statistics
import time

import llama_cpp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("-p", default="512")
    ap.add_argument("-n", default="128")
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("-o", default="md", choices=["md", "json"])
    a = ap.parse_args()
    pps = [int(x) for x in a.p.split(",") if x and int(x) > 0]
    tgs = [int(x) for x in a.n.split(",") if x and int(x) > 0]
    n_ctx = max(pps + [n + 1 for n in tgs] + [8])
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=max(n_ctx, 64), n_batch=512, n_ubatch=512,
                          n_threads=a.t, n_threads_batch=a.t, verbose=False)
    rng = random.Random(a.seed)
    n_vocab = llm.n_vocab()
    rows = []

    def run(kind, n):
        samples = []
        for rep in range(a.r + 1):
            toks = [rng.randrange(n_vocab) for _ in range(n)]
            llm.reset()
            t0 = time.perf_counter()
            if kind == "pp":
                llm.eval(toks)
            else:
                for t in toks:
                    llm.eval([t])
            samples.append(n / (time.perf_counter() - t0))
        meas = samples[1:]
        rows.append({"test": "%s%d" % (kind, n), "tps_median": statistics.median(meas), "tps_min": min(meas),
                     "tps_max": max(meas), "tps_warmup": samples[0], "tps_samples": meas})

    for n in pps:
        run("pp", n)
    for n in tgs:
        run("tg", n)
    info = {"model": a.model, "llama_cpp_python": llama_cpp.__version__, "threads": a.t,
            "system_info": llama_cpp.llama_print_system_info().decode().strip(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "repetitions": a.r, "tests": rows}
    if a.o == "json":
        print(json.dumps(info, indent=2))
        return
    print("llama.cpp via llama-cpp-python %s, %s, threads %d" % (info["llama_cpp_python"], info["date"], a.t))
    print("system_info: %s\n" % info["system_info"])
    print("| test | threads | t/s (median of %d) | min .. max | warm-up t/s |" % a.r)
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %d | %.2f | %.2f .. %.2f | %.2f |" % (r["test"], a.t, r["tps_median"], r["tps_min"], r["tps_max"],
                                                           r["tps_warmup"]))


if __name__ == "__main__":
    main()
