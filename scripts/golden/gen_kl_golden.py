#!/usr/bin/env python3
"""llama.cpp's distributions over a text, as a jllm-perplexity reference (--kl-base FILE).

The reference evaluates the text as llama-perplexity does (apps/perplexity/perplexity.h): the
tokens (BOS first where the model adds one) cut into chunks of -c, each chunk from an empty
context with its first token replaced by BOS where the model adds one, FP16 KV cache and flash
attention off (--kv-type q8_0: a q8_0 cache, flash attention on); the scored positions j in [c/2, c - 1) are written in jllm-perplexity's
log-probability format ("JLLMKLD1": per position log p(next), the 64 most probable tokens,
descending, and the log-probabilities of a fixed sample of 128 token ids).

Usage: gen_kl_golden.py MODEL.gguf TEXT OUT.kld [-c 512] [--chunks 8] [-t 2] [--kv-type f16|q8_0]
"""
import argparse
import os
import struct
import sys

import numpy as np

N_TOP = 64
N_SAMPLE = 128


def rows_of(logits, tokens, first, sample_ids):
    """(logp_next, top_ids, top_logps, sample_logps) for the scored positions of one chunk."""
    out = []
    for j in range(first, len(tokens) - 1):
        row = logits[j].astype(np.float64)
        mx = row.max()
        lp = row - (mx + np.log(np.exp(row - mx).sum()))
        cand = np.argpartition(-lp, N_TOP)[:N_TOP]
        top = cand[np.lexsort((cand, -lp[cand]))]  # descending, ties by id (as jllm-perplexity)
        out.append((float(lp[tokens[j + 1]]), top.astype(np.int32), lp[top].astype(np.float32),
                    lp[sample_ids].astype(np.float32)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('model')
    ap.add_argument('text')
    ap.add_argument('out')
    ap.add_argument('-c', type=int, default=512)
    ap.add_argument('--chunks', type=int, default=8)
    ap.add_argument('-t', type=int, default=os.cpu_count())
    ap.add_argument('--kv-type', choices=['f16', 'q8_0'], default='f16',
                    help="llama.cpp's KV cache type (q8_0 turns flash attention on, which llama.cpp needs for it)")
    a = ap.parse_args()

    import llama_cpp
    kv = {'f16': llama_cpp.GGML_TYPE_F16, 'q8_0': llama_cpp.GGML_TYPE_Q8_0}[a.kv_type]
    llm = llama_cpp.Llama(model_path=a.model, n_ctx=a.c, n_batch=a.c, n_ubatch=a.c, logits_all=True,
                          n_threads=a.t, n_threads_batch=a.t, flash_attn=a.kv_type != 'f16', type_k=kv, type_v=kv,
                          verbose=False)
    text = open(a.text, encoding='utf-8').read()
    bos_probe = llm.tokenize(b'', add_bos=True, special=False)
    bos = bos_probe[0] if bos_probe else -1
    tokens = llm.tokenize(text.encode('utf-8'), add_bos=True, special=False)
    whole = len(tokens) // a.c
    if whole < a.chunks:
        sys.exit('the text has %d tokens: fewer than %d chunks of %d' % (len(tokens), a.chunks, a.c))
    V = llm.n_vocab()
    first = a.c // 2
    name = 'llama.cpp (llama-cpp-python %s), %s, %s KV' % (llama_cpp.__version__, os.path.basename(a.model), a.kv_type)
    sample_ids = np.sort(np.random.default_rng(1).choice(V, N_SAMPLE, replace=False)).astype(np.int32)
    chunks = []
    for c in range(a.chunks):
        chunk = list(tokens[c * a.c:(c + 1) * a.c])
        if bos >= 0:
            chunk[0] = bos
        chunks.append(chunk)
    with open(a.out, 'wb') as f:
        f.write(b'JLLMKLD1')
        f.write(struct.pack('<6I', V, a.c, a.chunks, first, N_TOP, N_SAMPLE))
        nb = name.encode('utf-8')
        f.write(struct.pack('<I', len(nb)))
        f.write(nb)
        f.write(sample_ids.astype('<i4').tobytes())
        for chunk in chunks:
            f.write(struct.pack('<%di' % len(chunk), *chunk))
        nll = []
        for c, chunk in enumerate(chunks):
            llm.reset()
            llm.eval(chunk)
            logits = np.asarray(llm.scores[:a.c], dtype=np.float32)
            for lp_next, ids, logps, samples in rows_of(logits, chunk, first, sample_ids):
                nll.append(-lp_next)
                f.write(struct.pack('<f', lp_next))
                f.write(ids.astype('<i4').tobytes())
                f.write(logps.astype('<f4').tobytes())
                f.write(samples.astype('<f4').tobytes())
            print('[%d/%d] PPL %.4f' % (c + 1, a.chunks, float(np.exp(np.mean(nll)))), file=sys.stderr)
    print('%s: PPL = %.4f over %d positions -> %s' % (name, float(np.exp(np.mean(nll))), len(nll), a.out))


if __name__ == '__main__':
    main()
