#!/usr/bin/env python3
"""gen_quant_goldens.py — golden vectors for the quant/ reference dequantizers and fp16 rounding.

The expected values come from an implementation independent of ours: the `gguf` Python package
(`gguf.quants.dequantize`, numpy) for every type it knows, and plain numpy formulas for the two
activation types it does not dequantize (Q8_1, Q8_K). f32 -> f16 rounding is numpy's
`astype(np.float16)`; f32 -> bf16 is `gguf.quants.quantize(..., BF16)` (numpy bit arithmetic).

Blocks are random bytes, except that every fp16/f32 scale field (d, m, dmin, s) holds a finite,
reasonable value: random sign, magnitude 2^-14 .. 2^4 mostly, with some fp16 subnormals, zeros
and a few large values (up to 2^10), so products stay finite.

Run from the repository root:  python3 scripts/golden/gen_quant_goldens.py
Requires: pip install gguf numpy.  Deterministic (fixed seed); rewrites tests/data/quant/.

File formats (all little-endian):

  tests/data/quant/dequant_<TYPE>.bin     one per type: F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1
                                          Q2_K Q3_K Q4_K Q5_K Q6_K Q8_K
    char[4]  magic "JQD1"
    uint32   ggml type id (GGUF numbering)
    uint32   n_blocks
    uint32   block_size   (elements per block; 1 for F16/BF16)
    uint32   type_size    (bytes per block)
    uint8    blocks[n_blocks * type_size]           the raw blocks, GGUF byte layout
    float32  expected[n_blocks * block_size]        dequantized values, element order

  tests/data/quant/round_f32.bin          f32 -> f16 and f32 -> bf16 rounding
    char[4]  magic "JQR1"
    uint32   n
    uint32   input_bits[n]      float32 bit patterns (ties, subnormals, overflow, inf, NaN, random)
    uint16   f16_bits[n]        numpy astype(float16) (round to nearest even)
    uint16   bf16_bits[n]       round to nearest even; NaN -> quiet NaN keeping the top bits

NaN note: for NaN inputs numpy keeps the payload in f16 (0x7f800001 -> 0x7c01) where the
hardware and our converter return a quiet NaN; tests compare only NaN-ness and sign there.
Q8_1 note: gguf's size table still lists Q8_1 as 40 bytes (float d, s); ggml and we use the
36-byte block with fp16 d and s, which is what this file writes.
"""

import os
import struct
import sys

import numpy as np

try:
    from gguf import GGMLQuantizationType as T
    from gguf import quants
except ImportError:  # pragma: no cover
    sys.exit("needs the gguf package: pip install gguf numpy")

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "quant")
QK_K = 256

# type: (type id, block_size, type_size, n_blocks, [(byte offset, 'f16'|'f32') of scale fields])
TYPES = {
    "F16": (T.F16, 1, 2, 2048, []),
    "BF16": (T.BF16, 1, 2, 2048, []),
    "Q4_0": (T.Q4_0, 32, 18, 64, [(0, "f16")]),
    "Q4_1": (T.Q4_1, 32, 20, 64, [(0, "f16"), (2, "f16")]),
    "Q5_0": (T.Q5_0, 32, 22, 64, [(0, "f16")]),
    "Q5_1": (T.Q5_1, 32, 24, 64, [(0, "f16"), (2, "f16")]),
    "Q8_0": (T.Q8_0, 32, 34, 64, [(0, "f16")]),
    "Q8_1": (T.Q8_1, 32, 36, 64, [(0, "f16"), (2, "f16")]),
    "Q2_K": (T.Q2_K, QK_K, 84, 16, [(80, "f16"), (82, "f16")]),
    "Q3_K": (T.Q3_K, QK_K, 110, 16, [(108, "f16")]),
    "Q4_K": (T.Q4_K, QK_K, 144, 16, [(0, "f16"), (2, "f16")]),
    "Q5_K": (T.Q5_K, QK_K, 176, 16, [(0, "f16"), (2, "f16")]),
    "Q6_K": (T.Q6_K, QK_K, 210, 16, [(208, "f16")]),
    "Q8_K": (T.Q8_K, QK_K, 292, 16, [(0, "f32")]),
}


def random_scales(rng, n):
    """Finite float32 scale values: mostly normal fp16 range, some subnormal, zero, large."""
    mag = np.exp2(rng.uniform(-14.0, 4.0, n))
    kind = rng.uniform(0.0, 1.0, n)
    mag = np.where(kind < 0.06, np.exp2(rng.uniform(-24.0, -14.0, n)), mag)  # fp16 subnormals
    mag = np.where((kind >= 0.06) & (kind < 0.09), 0.0, mag)
    mag = np.where(kind >= 0.97, np.exp2(rng.uniform(4.0, 10.0, n)), mag)
    sign = np.where(rng.uniform(0.0, 1.0, n) < 0.5, -1.0, 1.0)
    return (sign * mag).astype(np.float32)


def make_blocks(rng, name):
    tid, bs, ts, nb, fields = TYPES[name]
    raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    if name == "F16":
        # Random finite halves and infinities (no NaN: see the NaN note above), plus specials.
        h = raw.view(np.uint16).reshape(-1)
        h = np.where((h & 0x7C00) == 0x7C00, h & 0xFC00, h)
        h[:8] = [0x0000, 0x8000, 0x0001, 0x83FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00]
        return h.astype(np.uint16).view(np.uint8).reshape(nb, ts)
    if name == "BF16":
        b = raw.view(np.uint16).reshape(-1)
        b[:8] = [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x7F7F, 0x7F80, 0xFF80]
        return b.view(np.uint8).reshape(nb, ts)
    for off, kind in fields:
        vals = random_scales(rng, nb)
        if kind == "f16":
            raw[:, off:off + 2] = vals.astype(np.float16).view(np.uint8).reshape(nb, 2)
        else:
            raw[:, off:off + 4] = vals.view(np.uint8).reshape(nb, 4)
    if name == "Q8_K":  # bsums consistent with qs (they do not enter the values)
        qs = raw[:, 4:4 + QK_K].view(np.int8).astype(np.int16)
        bsums = qs.reshape(nb, QK_K // 16, 16).sum(axis=-1).astype(np.int16)
        raw[:, 4 + QK_K:] = bsums.view(np.uint8).reshape(nb, QK_K // 8)
    return raw


def dequantize(name, blocks):
    tid, bs, ts, nb, _ = TYPES[name]
    if name == "Q8_1":  # not dequantized by gguf: x = d * q (s does not enter the values)
        d = blocks[:, 0:2].copy().view(np.float16).astype(np.float32)
        q = blocks[:, 4:].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    if name == "Q8_K":  # not dequantized by gguf: x = d * q with a float32 d
        d = blocks[:, 0:4].copy().view(np.float32)
        q = blocks[:, 4:4 + QK_K].copy().view(np.int8).astype(np.float32)
        return (d * q).reshape(-1)
    out = quants.dequantize(blocks.reshape(-1), tid)
    return np.asarray(out, dtype=np.float32).reshape(-1)


def write_dequant(name, blocks, expected):
    tid, bs, ts, nb, _ = TYPES[name]
    assert blocks.shape == (nb, ts) and expected.shape == (nb * bs,)
    with open(os.path.join(OUT_DIR, f"dequant_{name}.bin"), "wb") as f:
        f.write(b"JQD1")
        f.write(struct.pack("<4I", int(tid), nb, bs, ts))
        f.write(blocks.astype(np.uint8).tobytes())
        f.write(expected.astype("<f4").tobytes())


def rounding_inputs(rng):
    v = []
    # f16 normal range ties: exact halfway points above halves with even and odd mantissas, and
    # the float32 neighbours on each side of every tie.
    h = rng.integers(0x0400, 0x7BFF, size=160, dtype=np.uint16)
    h = np.concatenate([h, np.array([0x0400, 0x0401, 0x3C00, 0x3C01, 0x7BFE, 0x7BFF], np.uint16)])
    hb = h.view(np.float16).astype(np.float32).view(np.uint32)
    for delta in (0x1000, 0x0FFF, 0x1001):
        v += list(hb + np.uint32(delta))
    # subnormal ties: k * 2^-25 for odd k lies halfway between two f16 subnormals.
    k = np.concatenate([rng.integers(1, 2048, size=120) | 1, np.array([1, 3, 2045, 2047])])
    ties = (k.astype(np.float64) * 2.0 ** -25).astype(np.float32)
    v += list(ties.view(np.uint32))
    v += list(ties.view(np.uint32) + np.uint32(1))
    v += list(ties.view(np.uint32) - np.uint32(1))
    special = [
        0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000,  # zeros, f32 subnormals
        0x33000000, 0x33000001, 0x32FFFFFF, 0x33800000, 0x33C00000,  # 2^-25 .. 1.5 * 2^-24
        0x387FC000, 0x387FE000, 0x387FFFFF, 0x38800000,              # around 2^-14
        0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x47800000,  # around 65504 / 65520
        0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000,              # max float, infinities
        0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0x7FFFFFFF,  # NaNs
        0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001,              # bf16 ties near 1
        0x7F7F8000, 0x7F7F7FFF, 0x0000FFFF, 0x00008000, 0x00018000,  # bf16 overflow, subnormals
    ]
    v += special
    # random bit patterns over the whole float32 range.
    v += list(rng.integers(0, 2 ** 32, size=1024, dtype=np.uint64).astype(np.uint32))
    # random values of ordinary magnitude.
    v += list(rng.normal(0.0, 1.0, 256).astype(np.float32).view(np.uint32))
    return np.array(v, dtype=np.uint32)


def write_rounding(rng):
    bits = rounding_inputs(rng)
    f = bits.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        f16 = f.astype(np.float16).view(np.uint16)
    bf16 = np.asarray(quants.quantize(f.copy(), T.BF16)).view(np.uint16).reshape(-1)
    assert bf16.shape == bits.shape
    with open(os.path.join(OUT_DIR, "round_f32.bin"), "wb") as out:
        out.write(b"JQR1")
        out.write(struct.pack("<I", bits.size))
        out.write(bits.astype("<u4").tobytes())
        out.write(f16.astype("<u2").tobytes())
        out.write(bf16.astype("<u2").tobytes())


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    rng = np.random.default_rng(20261129)
    for name in TYPES:
        blocks = make_blocks(rng, name)
        expected = dequantize(name, blocks)
        assert np.all(np.isfinite(expected) | (name in ("F16", "BF16"))), name
        write_dequant(name, blocks, expected)
    write_rounding(rng)
    total = sum(os.path.getsize(os.path.join(OUT_DIR, n)) for n in os.listdir(OUT_DIR))
    print(f"wrote {len(os.listdir(OUT_DIR))} files, {total} bytes, to {os.path.normpath(OUT_DIR)}")


if __name__ == "__main__":
    main()
