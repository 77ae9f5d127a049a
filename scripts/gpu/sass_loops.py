#!/usr/bin/env python3
"""scripts/gpu/sass_loops.py — the loops of each kernel in a SASS listing (`cuobjdump -sass`) and
what their bodies issue: a static count of the instructions one trip of a loop issues per warp,
by opcode. With the tile bytes a trip reads, that is the issue slots a kernel needs per byte,
to set against a GPU's issue slots per byte of bandwidth (docs/gpu_speed_notes.md, session 50).

Usage: sass_loops.py LISTING.sass [--kernel REGEX] [--top N]
  LISTING.sass  cuobjdump -sass output, e.g. of
                nvcc -O3 -std=c++17 -I src -I include --expt-relaxed-constexpr -arch=sm_87 -cubin \
                    -o g.cubin src/backend/cuda/gemv_q8_tiled.cu
  --kernel      only kernels whose demangled name (through c++filt where it is installed)
                matches REGEX
  --top         opcodes listed per loop (default 8)
A loop is the range from a backward branch's target to the branch. Prints one line per kernel
(its name and instruction count) and one per loop. Exit status 1 when no kernel matched.
"""
import argparse
import re
import shutil
import signal
import subprocess
import sys

INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
BRANCH = re.compile(r"\bBRA(?:\.\w+)*\s+(?:`\(\.L_x_\d+\)\s*)?(0x[0-9a-f]+)")
PREDICATE = re.compile(r"^@!?U?P[T\d]+\s+")


def demangle(names):
    if not names or shutil.which("c++filt") is None:
        return list(names)
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    lines = out.split("\n")
    return lines[: len(names)] if len(lines) >= len(names) else list(names)


def parse(text):
    """[(mangled name, [(address, instruction text)])] per function of the listing."""
    funcs = []
    for part in re.split(r"\n\s*Function : ", "\n" + text)[1:]:
        name, _, body = part.partition("\n")
        instrs = []
        for line in body.split("\n"):
            m = INSTR.match(line)
            if m:
                instrs.append((int(m.group(1), 16), m.group(2)))
        funcs.append((name.strip(), instrs))
    return funcs


def opcode(text):
    return PREDICATE.sub("", text).split()[0].split(".")[0]


def loops(instrs):
    """[(start address, end address, {opcode: count})] for each backward branch, in order."""
    index = {a: i for i, (a, _) in enumerate(instrs)}
    out = []
    for i, (a, text) in enumerate(instrs):
        m = BRANCH.search(text)
        if not m:
            continue
        target = int(m.group(1), 16)
        if target >= a or target not in index:
            continue
        counts = {}
        for _, t in instrs[index[target] : i + 1]:
            op = opcode(t)
            counts[op] = counts.get(op, 0) + 1
        out.append((target, a, counts))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("listing")
    ap.add_argument("--kernel", default=None)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    with open(args.listing) as f:
        funcs = parse(f.read())
    names = demangle([n for n, _ in funcs])
    pattern = re.compile(args.kernel) if args.kernel else None
    shown = 0
    for (mangled, instrs), name in zip(funcs, names):
        if pattern is not None and not pattern.search(name):
            continue
        shown += 1
        print(f"{name}: {len(instrs)} instructions")
        for start, end, counts in loops(instrs):
            total = sum(counts.values())
            top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: args.top]
            print(f"  loop {start:#x}..{end:#x}: {total} " + " ".join(f"{op} {n}" for op, n in top))
    if shown == 0:
        print("sass_loops.py: no kernel matched", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    sys.exit(main(sys.argv[1:]))
