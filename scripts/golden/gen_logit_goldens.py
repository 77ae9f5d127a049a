#!/usr/bin/env python3
"""Teacher-forced logit goldens from llama.cpp (through llama-cpp-python), the independent
reference for the CPU engine's forward pass.

For each prompt the reference evaluates every position (FP16 KV cache, no flash attention)
and we keep, per position, enough to check relative RMS error, top-1 agreement and KL without
committing the full [n_tokens, n_vocab] logits:

File format (little-endian):
  magic b"JLLMLGT1"
  u32 n_vocab, u32 n_prompts, u32 n_sample, u32 n_top
  i32 sample_ids[n_sample]          one fixed random subset of the vocabulary
  per prompt:
    u32 n_tokens, i32 tokens[n_tokens]    (ids from llama.cpp's tokenizer)
    per position:
      f32 lse, f32 mean, f32 std       log-sum-exp, mean and std of the full logit row
      i32 top_ids[n_top], f32 top_logits[n_top]   the reference's top-n, descending
      f16 sample_logits[n_sample]      the logits of sample_ids (fp16: <= 2^-11 relative)

Usage: gen_logit_goldens.py MODEL.gguf OUT.bin [--prompts smollm2]
"""
import argparse
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

CODE_TEXT = '''def merge_intervals(intervals):
    """Merge overlapping closed intervals given as (start, end) pairs."""
    if not intervals:
        return []
    ordered = sorted(intervals, key=lambda pair: pair[0])
    merged = [list(ordered[0])]
    for start, end in ordered[1:]:
        last = merged[-1]
        if start <= last[1]:
            last[1] = max(last[1], end)
        else:
            merged.append([start, end])
    return [tuple(pair) for pair in merged]


class LruCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.items = {}
        self.order = []

    def get(self, key, default=None):
        if key not in self.items:
            return default
        self.order.remove(key)
        self.order.append(key)
        return self.items[key]

    def put(self, key, value):
        if key in self.items:
            self.order.remove(key)
        elif len(self.items) >= self.capacity:
            oldest = self.order.pop(0)
            del self.items[oldest]
        self.items[key] = value
        self.order.append(key)


if __name__ == "__main__":
    print(merge_intervals([(1, 3), (2, 6), (8, 10), (15, 18), (17, 20)]))
    cache = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    cache.get("a")
    cache.put("c", 3)
    print(sorted(cache.items))
'''

CHAT_TEXT = ('<|im_start|>system\nYou are a helpful assistant for a smart home. Answer briefly.<|im_end|>\n'
             '<|im_start|>user\nTurn on the kitchen lights and tell me the temperature in the living room.<|im_end|>\n'
             '<|im_start|>assistant\nI turned on the kitchen lights. The living room is at 21.5 degrees Celsius.<|im_end|>\n'
             '<|im_start|>user\nWhat should I cook tonight with eggs, spinach, tomatoes and some feta cheese? '
             'Give me a recipe with steps and an estimate of the time it takes.<|im_end|>\n'
             '<|im_start|>assistant\nA spinach and feta frittata works well with what you have.\n\n'
             'Ingredients: six eggs, two handfuls of spinach, two tomatoes, 100 grams of feta, olive oil, salt and pepper.\n\n'
             'Steps:\n1. Heat the oven to 200 degrees.\n2. Whisk the eggs with salt and pepper.\n'
             '3. Wilt the spinach in an oven-safe pan with a little olive oil.\n4. Add the sliced tomatoes and crumble in the feta.\n'
             '5. Pour the eggs over, cook for three minutes on the stove, then bake for twelve minutes until set.\n\n'
             'It takes about twenty-five minutes in total and serves two people.<|im_end|>\n'
             '<|im_start|>user\nThanks! Also remind me tomorrow at 7:30 to water the plants, and set the thermostat to 19 at night.<|im_end|>\n'
             '<|im_start|>assistant\nDone. I set a reminder for tomorrow at 7:30 to water the plants, and the thermostat '
             'will switch to 19 degrees at 22:00 every night until you change it.<|im_end|>\n')

MIXED_TEXT = ('Inventory report, week 47.\n'
              '| item | count | price (EUR) |\n|---|---|---|\n| bolts M6 | 1,250 | 0.08 |\n| nuts M6 | 1,180 | 0.05 |\n'
              '| washers | 3,400 | 0.02 |\n| hinges | 75 | 2.40 |\n| brackets | 310 | 1.15 |\n\n'
              'Totals: 6,215 items, 412.85 EUR. Pi is 3.14159265358979323846; e is 2.71828182845904523536.\n'
              'Phone numbers: +49 30 1234567, +1 (555) 010-9999. Dates: 2026-11-29, 29.11.2026, 11/29/2026.\n'
              'Le petit chat dort sur le canap\u00e9 pendant que la pluie tombe doucement sur la ville. '
              'Der schnelle braune Fuchs springt \u00fcber den faulen Hund. '
              'El r\u00e1pido zorro marr\u00f3n salta sobre el perro perezoso. '
              'Una giornata di sole al mare con gli amici \u00e8 sempre piacevole.\n'
              'Shopping list: milk, bread, 12 eggs, 3 onions, 500 g of rice, 2 kg of potatoes, coffee beans, '
              'olive oil, lemons, garlic, basil, parmesan, pasta (penne and spaghetti), canned tomatoes.\n'
              'Meeting notes: the firmware update 4.2.1 fixes the Wi-Fi reconnect bug; battery life improved by 12%; '
              'the next release is planned for January. Action items: Anna tests the Zigbee bridge, Tom updates the docs, '
              'Lea reviews the power budget of the voice pipeline (wake word, speech-to-text, language model, text-to-speech).\n'
              'Morse: ... --- ... ; binary: 01001000 01101001 ; hex: 0xDEADBEEF 0x1F 0x7FFFFFFF.\n')


def smollm2_prompts(tokenize):
    text = open(os.path.join(ROOT, 'tests/data/text/public_domain.txt'), encoding='utf-8').read()
    ids = tokenize(text)
    prompts = [ids[:1024]]
    for start in (1024, 1324, 1624, 1924):
        prompts.append(ids[start:start + 300])
    prompts.append(tokenize(CHAT_TEXT))
    prompts.append(tokenize(CODE_TEXT))
    prompts.append(tokenize(MIXED_TEXT))
    return prompts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('model')
    ap.add_argument('out')
    ap.add_argument('--n-sample', type=int, default=256)
    ap.add_argument('--n-top', type=int, default=32)
    ap.add_argument('--threads', type=int, default=2)
    args = ap.parse_args()

    import llama_cpp
    llm = llama_cpp.Llama(model_path=args.model, n_ctx=1280, n_batch=512, n_threads=args.threads,
                          logits_all=True, verbose=False, flash_attn=False)
    n_vocab = llm.n_vocab()
    tokenize = lambda s: llm.tokenize(s.encode('utf-8'), add_bos=False, special=True)
    prompts = smollm2_prompts(tokenize)
    for p in prompts:
        assert len(p) >= 256, len(p)
    rng = np.random.default_rng(1234)
    sample_ids = np.sort(rng.choice(n_vocab, size=args.n_sample, replace=False)).astype(np.int32)

    with open(args.out, 'wb') as f:
        f.write(b'JLLMLGT1')
        f.write(struct.pack('<IIII', n_vocab, len(prompts), args.n_sample, args.n_top))
        f.write(sample_ids.tobytes())
        for p in prompts:
            llm.reset()
            llm.eval(p)
            logits = np.array(llm.scores[:len(p)], dtype=np.float32)
            f.write(struct.pack('<I', len(p)))
            f.write(np.asarray(p, dtype=np.int32).tobytes())
            for row in logits:
                m = row.max()
                lse = m + np.log(np.exp((row - m).astype(np.float64)).sum())
                top = np.argsort(-row, kind='stable')[:args.n_top].astype(np.int32)
                f.write(struct.pack('<fff', float(lse), float(row.mean()), float(row.std())))
                f.write(top.tobytes())
                f.write(row[top].astype(np.float32).tobytes())
                f.write(row[sample_ids].astype(np.float16).tobytes())
            print(f'prompt of {len(p)} tokens done', file=sys.stderr)
    print(f'wrote {args.out}', file=sys.stderr)


if __name__ == '__main__':
    main()
