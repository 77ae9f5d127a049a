#!/usr/bin/env python3
"""Golden token ids for the tokenizer tests, from the Hugging Face `tokenizers` library.

Writes tests/data/tokenizer/:
  corpus.jsonl      one case per line: {"name", "hex" (the input bytes), "qwen3_nfc" (the
                    NFC form when it differs from the text), per tokenizer:
                    "<tok>": ids with special tokens as plain text (our parse_special=false),
                    "<tok>_special": ids with special tokens parsed (parse_special=true)}
  tiny_bpe/tokenizer.json   a small byte-level BPE trained here, with added tokens that use
                    lstrip / rstrip (neither reference tokenizer has any)
  smollm2.jsonl     the same corpus for the `smollm` family, when a SmolLM2 GGUF is at hand
                    (--smollm2, default models/SmolLM2-135M-Instruct.Q4_1.gguf): no SmolLM2
                    tokenizer.json is bundled, so the reference is HF `tokenizers` built from the
                    GGUF's own vocab and merges with SmolLM2's pre-tokenizer (Digits with
                    individual_digits, then ByteLevel with its regex) and its control tokens as
                    special added tokens
  bench_prompt.txt  the ~1,000-token prompt of bench/tokenizer (an English assistant prompt)
  bench_prompt_multilingual.txt  ~1,000 qwen3 tokens of the corpus's valid texts (every script,
                    emoji, combining marks: the NFC and multi-byte paths)

How the reference sees the input: the bytes are decoded with bytes.decode("utf-8", "replace")
(each maximal ill-formed subpart becomes one U+FFFD), which is what the C++ encoder does to
ill-formed input before tokenizing. No BOS/EOS is added (add_special_tokens=False).
"parse_special=false" is HF with `encode_special_tokens = True`: special added tokens are plain
text, non-special added tokens (Qwen's <think>, <tool_call>) are still recognised.

Usage: python3 scripts/golden/gen_tokenizer_goldens.py [--shared ../shared]
Needs: pip install tokenizers   (checked with tokenizers 0.23.3)
"""
import argparse
import json
import os
import random
import sys

import tokenizers
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "data", "tokenizer")


def base_texts():
    """(name, bytes) pairs written for this corpus."""
    t = []

    def add(name, s):
        t.append((name, s.encode("utf-8") if isinstance(s, str) else s))

    # --- natural languages, one script each -------------------------------------------------
    add("en", "The quick brown fox doesn't jump; it waits, then it's gone. We'll see, they'd say.")
    add("en_caps", "SHOUTING IT'S LOUD AND WE'RE HERE, YOU'VE BEEN WARNED, I'M SURE, HE'LL KNOW.")
    add("de", "Größenwahn über Straßenbahnen: Fußgänger müssen draußen warten, ätzend!")
    add("fr", "Où est la bibliothèque ? L'été dernier, nous étions à Besançon, près de l'hôpital.")
    add("es", "¿Dónde está el niño? ¡Mañana será otro día! Pingüino, cigüeña y acción.")
    add("pt", "Não há nada como pão de queijo e café coado às sete da manhã.")
    add("pl", "Zażółć gęślą jaźń — pchnąć w tę łódź jeża lub ośm skrzyń fig.")
    add("tr", "İstanbul'da ılık bir akşam; ığdır, şişli, çağlayan, göğüs.")
    add("ru", "Съешь же ещё этих мягких французских булок, да выпей чаю.")
    add("uk", "Ґанок, їжак, євро, йод — українська абетка має свої літери.")
    add("bg", "Жълтата дюля беше щастлива, че пухът, който цъфна, замръзна като гьон.")
    add("el", "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία. Γειά σου, κόσμε!")
    add("ar", "مرحبا بالعالم، هذه جملة عربية قصيرة للاختبار ١٢٣٤٥.")
    add("he", "שלום עולם, זהו משפט בעברית עם ניקוד: שָׁלוֹם.")
    add("fa", "سلام دنیا؛ این یک آزمایش است. ۱۲۳۴۵۶۷۸۹۰")
    add("hi", "नमस्ते दुनिया, यह एक परीक्षण वाक्य है। १२३४५")
    add("bn", "আমি বাংলায় গান গাই, তোমার জন্য ভালোবাসা।")
    add("ta", "வணக்கம் உலகம், இது ஒரு சோதனை வாக்கியம்.")
    add("te", "తెలుగు భాష చాలా అందమైనది.")
    add("th", "สวัสดีชาวโลก นี่คือประโยคทดสอบภาษาไทย")
    add("km", "សួស្តីពិភពលោក នេះគឺជាប្រយោគសាកល្បង")
    add("lo", "ສະບາຍດີ ໂລກ")
    add("my", "မင်္ဂလာပါ ကမ္ဘာလောက")
    add("zh_hans", "我想在苹果公司工作一千三百一十四天，然后去旅行。")
    add("zh_hant", "繁體中文的測試句子，包含標點符號：「你好」。")
    add("ja", "吾輩は猫である。名前はまだ無い。カタカナとひらがなを混ぜる。")
    add("ko", "안녕하세요 세계! 한국어 문장을 토큰화합니다. 값은 12,345원입니다.")
    add("vi", "Cửa Việt, Tiếng Việt có dấu: ả ã ạ ấ ầ ẩ ẫ ậ.")
    add("ka", "გამარჯობა მსოფლიო, ეს ქართული წინადადებაა.")
    add("hy", "Բարեւ աշխարհ, սա հայերեն նախադասություն է։")
    add("am", "ሰላም ልዑል፣ ይህ የአማርኛ ሙከራ ነው።")
    add("si", "ආයුබෝවන් ලෝකය")
    add("mn", "Сайн байна уу ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ")
    add("bo", "བཀྲ་ཤིས་བདེ་ལེགས།")
    add("yi_mixed", "English, Deutsch, Русский, 中文, العربية, हिन्दी, 日本語 in one line.")

    # --- code ---------------------------------------------------------------------------------
    add("py", "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n")
    add("cpp", "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\tfor (auto& x : v) x *= 2;\n\treturn v[0] == 2 ? 0 : 1;\n}\n")
    add("json", '{"name": "genie", "version": [0, 1, 0], "nested": {"ok": true, "pi": 3.14159}}')
    add("html", '<div class="x"><p>Hello &amp; welcome</p><br/><a href="https://example.com/?q=1&r=2">link</a></div>')
    add("shell", "for f in *.gguf; do\n  sha256sum \"$f\" | cut -c1-16 >> sums.txt  # comment\ndone\n")
    add("rust", "fn main() {\n    let s: &str = \"héllo\";\n    println!(\"{}\", s.len());\n}\n")
    add("sql", "SELECT id, name FROM users WHERE age >= 21 AND name LIKE '%ann%' ORDER BY id DESC;")
    add("regex", r"^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@(?:\w+\.)+[a-z]{2,}$")
    add("markdown", "# Title\n\n- item one\n- item **two**\n\n```python\nprint('x')\n```\n\n> quote\n")
    add("yaml", "server:\n  host: 127.0.0.1\n  port: 8080\n  tags: [a, b, c]\n")
    add("crlf_code", "line one\r\nline two\r\n\r\n\tindented\r\n")
    add("latex", r"\begin{equation} E = mc^2, \quad \int_0^\infty e^{-x^2} dx = \frac{\sqrt{\pi}}{2} \end{equation}")

    # --- emoji -----------------------------------------------------------------------------------
    add("emoji_basic", "I like 🍕 and 🍣, not 🥦. 😀😃😄😁")
    add("emoji_zwj_family", "family: 👨\u200d👩\u200d👧\u200d👦 and 👩\u200d👩\u200d👦")
    add("emoji_zwj_jobs", "👩\u200d💻 👨\u200d🚀 🧑\u200d🍳 🏳\ufe0f\u200d🌈 🏴\u200d☠\ufe0f")
    add("emoji_skin", "👍🏻 👍🏼 👍🏽 👍🏾 👍🏿 👋🏽 🧑🏿\u200d🤝\u200d🧑🏻")
    add("emoji_flags", "🇺🇸 🇩🇪 🇯🇵 🇧🇷 🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f")
    add("emoji_keycap", "1\ufe0f\u20e3 2\ufe0f\u20e3 #\ufe0f\u20e3 *\ufe0f\u20e3 ©\ufe0f ®\ufe0f ™\ufe0f")
    add("emoji_dense", "🚀🚀🚀🦙🦙🦙😶\u200d🌫\ufe0f✅❤\ufe0f\u200d🔥")
    add("emoji_text", "ok👌done✅next➡️end🔚")

    # --- combining characters and normalization ------------------------------------------------
    add("comb_e_decomposed", "cafe\u0301 vs caf\u00e9, nai\u0308ve, Ame\u0301lie")
    add("comb_zalgo", "Z\u0351\u036b\u0343a\u0310\u0352l\u0346\u0367g\u0300o\u0362 text")
    add("comb_hangul_jamo", "\u1100\u1161\u11a8 \u1112\u1161\u11ab\u1100\u1173\u11af")
    add("comb_vietnamese_nfd", "Vie\u0323\u0302t Nam, Tie\u0302\u0301ng Vie\u0323\u0302t")
    add("comb_angstrom", "\u212b \u00c5 A\u030a, \u2126 \u03a9, \ufb01 ligature")
    add("comb_devanagari", "क\u094d\u0937 त\u094d\u0930 ज\u094d\u091e, क़ क\u093c")
    add("comb_stack", "a\u0300\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308")
    add("comb_only", "\u0301\u0302 \u0303")

    # --- whitespace ---------------------------------------------------------------------------
    add("ws_spaces", "a    b        c                d")
    add("ws_tabs", "\t\t\tx\t\ty\t")
    add("ws_newlines", "\n\n\n\nx\n\n\n")
    add("ws_mixed", " \n \n\n \t \r\n  \r\r\n\n   x   \n")
    add("ws_trailing", "text with trailing spaces     ")
    add("ws_leading", "        leading spaces")
    add("ws_only_spaces", "                ")
    add("ws_unicode", "a\u00a0b\u2003c\u3000d\u2009e\u202ff\u205fg\u1680h")
    add("ws_line_sep", "one\u2028two\u2029three\u0085four")
    add("ws_mongolian_vs", "a\u180eb \u180e c")
    add("ws_zero_width", "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom")
    add("ws_vtab_ff", "a\x0bb\x0cc\x1cd\x1de\x1ef\x1fg")
    add("ws_cr_only", "a\rb\r\rc\r")
    add("ws_newline_punct", "end.\n\n\n---\n\n***\n")

    # --- numbers ---------------------------------------------------------------------------------
    add("num_long", "31415926535897932384626433832795028841971693993751058209749445923")
    add("num_grouped", "1,234,567.89 and 1 234 567,89 and 1_000_000")
    add("num_mixed", "v1.2.3-rc4 build 20261129 at 19:42:07.123Z, port 8080, 0xDEADBEEF, 1e-9")
    add("num_units", "5km 10kg 3.5GB 100% 2x 4K 1080p 60fps")
    add("num_nonascii", "٣٤٥ ৩৪৫ ௩௪௫ ３４５ ⅢⅣⅤ ½ ¾ ² ³ ①②")
    add("num_phone", "+1 (555) 010-9999, +44 20 7946 0958")

    # --- punctuation and contractions -------------------------------------------------------
    add("contractions", "I'm you're he's we've they'll she'd it's 'tis o'clock rock'n'roll")
    add("contractions_upper", "I'M YOU'RE HE'S WE'VE THEY'LL SHE'D IT'S")
    add("contractions_mixed", "We'Ve a'lL 'D you 'M not 'Re 'S")
    add("long_s", "it'ſ a long ſ, 'ſ")
    add("punct_runs", "!!!???...,,,;;;:::---===+++***&&&|||~~~```'''\"\"\"")
    add("quotes_unicode", "“smart quotes” ‘single’ «guillemets» „low“ 「brackets」")
    add("dashes", "en–dash em—dash minus−sign hyphen‐ figure‒dash")
    add("math", "∀x∈ℝ: x² ≥ 0 ⇒ √(x²) = |x|, ∑ᵢ aᵢ ≠ ∏ⱼ bⱼ ≈ ∞")
    add("currency", "$100 €200 £300 ¥400 ₹500 ₿0.01 ₩600")
    add("url", "https://huggingface.co/Qwen/Qwen3-4B?download=true#section-2 mailto:a@b.c")
    add("path", "C:\\Users\\me\\file.txt /usr/local/lib/libfoo.so.1.2 ~/.config/x")

    # --- invalid UTF-8 (decoded by the reference with errors="replace") -------------------------
    add("bad_lone_continuation", b"abc\x80def")
    add("bad_lone_lead", b"abc\xc3 def")
    add("bad_truncated_3", b"x\xe2\x82 y")
    add("bad_truncated_4", b"x\xf0\x9f\x98 y")
    add("bad_overlong", b"\xc0\xaf \xe0\x80\xaf")
    add("bad_surrogate", b"\xed\xa0\x80\xed\xbf\xbf")
    add("bad_above_max", b"\xf4\x90\x80\x80 \xf5\x80")
    add("bad_ff_fe", b"\xff\xfe\xfd")
    add("bad_at_end", b"end\xe4\xb8")
    add("bad_mixed_valid", "ok ".encode() + b"\x9f" + "日本".encode() + b"\xe6" + " 🦙".encode())
    add("bad_many", bytes(range(0x80, 0x100)))
    add("ascii_controls", bytes(range(0, 0x20)) + b"\x7f")
    add("nul_bytes", b"a\x00b\x00\x00c")

    # --- special tokens written in text -------------------------------------------------------
    add("sp_chatml", "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n")
    add("sp_think", "<think>\nreasoning here\n</think>\n\nThe answer is 42.")
    add("sp_tool_call", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
    add("sp_llama3", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>")
    add("sp_adjacent", "<|im_end|><|im_end|><|endoftext|>x<|endoftext|>")
    add("sp_spaces", "  <|im_start|>  spaced  <|im_end|>  ")
    add("sp_partial", "<|im_start <|im_end| <|im_|> <think </think")
    add("sp_nested", "<<|im_start|>|> <<think>>")
    add("sp_eot_text", "say <|eot_id|> and <|end_of_text|> and <|eom_id|>")
    add("sp_fim", "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>")
    add("sp_reserved", "<|reserved_special_token_0|> <|reserved_special_token_250|>")

    # --- edge cases ------------------------------------------------------------------------------
    add("empty", "")
    add("single_space", " ")
    add("single_char", "a")
    add("single_newline", "\n")
    add("single_emoji", "🦙")
    add("single_cjk", "字")
    add("apostrophe_only", "'")
    add("repeated_char_long", "a" * 300)
    add("repeated_space_long", " " * 257)
    add("repeated_newline_long", "\n" * 130)
    add("repeated_exclaim", "!" * 200)
    add("repeated_emoji", "😀" * 60)
    add("private_use", "\ue000\uf8ff \U000f0000")
    add("noncharacters", "\ufdd0\ufffe\uffff")
    add("replacement_char", "\ufffd literal replacement \ufffd")
    add("supplementary", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝒞𝓊𝓇𝓈𝒾𝓋ℯ 𐍈 𓀀 🀄")
    add("bidi_controls", "abc\u202edcba\u202c \u2066iso\u2069")
    add("variation_selectors", "☺\ufe0e ☺\ufe0f 葛\U000e0100")
    add("tag_chars", "\U000e0041\U000e0042")
    # Code points assigned in Unicode 15 / 15.1 (CJK Ext H and I, Kawi, Nag Mundari, new emoji):
    # where the regex engines' Unicode tables could disagree.
    add("unicode15", "a\U00031350b \U00031350\U00031351 x\U00011f04\U00011f05 y \U0001e4d0\U0001e4d1"
        " q\U0002b739 w 1\U0001e4f01 \U0001fae8 \U0001fa77")
    return t


def random_texts(base, n, seed=20261129):
    """Mixtures of fragments of the base texts: joins that cross scripts and whitespace kinds."""
    rng = random.Random(seed)
    seps = [" ", "", "\n", "  ", "\t", "\n\n", " \n", "\r\n", "'", "1", "\u3000"]
    valid = [b for _, b in base if b and not _is_bad(b)]
    out = []
    for i in range(n):
        parts = []
        for _ in range(rng.randint(2, 5)):
            s = rng.choice(valid).decode("utf-8")
            a = rng.randint(0, len(s))
            b = rng.randint(a, min(len(s), a + rng.randint(1, 40)))
            parts.append(s[a:b])
            parts.append(rng.choice(seps))
        out.append((f"mix_{i:03d}", "".join(parts).encode("utf-8")))
    return out


def _is_bad(b):
    try:
        b.decode("utf-8")
        return False
    except UnicodeDecodeError:
        return True


BENCH_PROMPT = """You are a helpful home assistant running on a small board in the hallway. Answer briefly, and when a request needs a device, call the matching tool with JSON arguments.

Household notes, kept up to date by the family:
- The living room has three ceiling lights (living_room_1 to living_room_3), a floor lamp and a television that is switched through a smart plug called tv_plug.
- The kitchen thermostat should stay between 19.5 and 22 degrees Celsius during the day and drop to 17 at night, except on weekends, when the night setting starts at 23:30.
- The garden irrigation runs at 06:15 for 12 minutes unless more than 4 mm of rain fell in the previous 24 hours; the rain gauge reports in tenths of a millimetre.
- Bins: paper every second Tuesday, plastic every Thursday, glass on the first Monday of the month. Remind someone the evening before.
- Nobody should be woken before 07:00 by an announcement, except for smoke, water-leak or door-left-open alarms.

Recent sensor readings (newest last):
hallway_motion=off (12 min ago); front_door=closed; back_door=closed; garage=open (since 18:02)
kitchen_temp=21.4; living_temp=20.9; bedroom_temp=18.7; outside_temp=6.3; humidity_bath=71%
power_now=412 W; solar_now=0 W; battery_soc=64%; car_charger=idle; washer=finished (17:48)

Tool schema (abbreviated):
{"name": "set_light", "arguments": {"entity": "string", "on": "bool", "brightness": "0-255", "color_temp_k": "int"}}
{"name": "set_climate", "arguments": {"entity": "string", "target_c": "float", "mode": "heat|off|auto"}}
{"name": "notify", "arguments": {"who": "string", "message": "string", "urgent": "bool"}}
{"name": "cover", "arguments": {"entity": "string", "position": "0-100"}}

A short history of this evening's conversation:
User: It's getting dark; can you dim the living room to something cosy and close the blinds halfway?
Assistant: Done. The three ceiling lights are at 35 % with a warm 2700 K, the floor lamp is off, and the blinds are at 50 %.
User: The garage has been open for a while, hasn't it? Who left it like that?
Assistant: The garage door has been open since 18:02. I can't tell who opened it, but the last car that arrived was at 17:55. Should I close it?
User: Yes, close it, and tell Sam that the washing is done and should be hung up before it starts to smell.
Assistant: The garage door is closing now. I've sent Sam a message: "The washing finished at 17:48; please hang it up soon."

def schedule_irrigation(rain_mm_24h: float, start="06:15", minutes=12) -> dict:
    # Skip watering after real rain; the gauge reports tenths of a millimetre.
    if rain_mm_24h > 4.0:
        return {"skip": True, "reason": f"{rain_mm_24h:.1f} mm of rain in 24 h"}
    return {"skip": False, "start": start, "minutes": minutes}

Questions people in the house often ask, with the answers the family agreed on:
Q: Is it safe to leave the heater on in the bathroom overnight? A: No; it turns itself off after two hours, and the assistant should say so.
Q: Can the car be charged from the battery at night? A: Only above 40 % state of charge, and never below 10 A.
Q: Why does the hallway light sometimes switch on by itself at 03:00? A: The motion sensor sees the cat; its sensitivity was lowered on 2026-11-02, and the light now stays at 10 % for 90 seconds.
Q: What happens when the internet is down? A: Everything here runs locally, so lights, heating and reminders keep working; only the weather forecast and the news stop.

User: Now please turn the bedroom heating up a little, to about 19.5, and remind me tomorrow morning about the glass recycling. Also, what was the outside temperature again?
Assistant:"""


def save_tiny_bpe(texts, path):
    """A small byte-level BPE with added tokens that use lstrip / rstrip."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.add_special_tokens([
        AddedToken("<|ctl|>", special=True, normalized=False),
        AddedToken("<mask>", lstrip=True, rstrip=False, special=True, normalized=False),
        AddedToken("[R]", lstrip=False, rstrip=True, special=True, normalized=False),
    ])
    tok.add_tokens([AddedToken("<user>", lstrip=True, rstrip=True, special=False, normalized=False)])
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tok.save(path)
    with open(os.path.join(os.path.dirname(path), "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|ctl|>", "add_bos_token": False}, f, indent=1)
        f.write("\n")
    return tok


TINY_TEXTS = [
    "hello <mask> world", "hello   <mask>", "<mask>   x", "a [R]   b", "a [R]\n\n b", "x  <user>  y",
    "<user>", "  <user>", "[R]", " \t<mask>[R]  <user>  z", "no specials at all", "<|ctl|> <mask> [R] <user>",
    "tab\t<mask>\ttab", "nbsp\u00a0<mask>\u00a0x", "ideographic\u3000<mask>\u3000[R]\u3000y",
]


def smollm2_reference(gguf_path):
    """HF tokenizer from a SmolLM2 GGUF's vocabulary (see the module docstring)."""
    from gguf import GGUFReader  # pip install gguf; only needed for this optional part

    fields = GGUFReader(gguf_path).fields

    def strings(key):
        f = fields[key]
        return [f.contents(i) for i in range(len(f.data))]

    tokens = strings("tokenizer.ggml.tokens")
    types = [int(x) for x in strings("tokenizer.ggml.token_type")]
    merges = [tuple(m.split(" ", 1)) for m in strings("tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty == 3])  # CONTROL
    return tok


def encode_both(tok, text):
    tok.encode_special_tokens = True
    plain = tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    special = tok.encode(text, add_special_tokens=False).ids
    return plain, special


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--smollm2", default=os.path.join(ROOT, "models",
                                                      "SmolLM2-135M-Instruct.Q4_1.gguf"))
    args = ap.parse_args()

    refs = {}
    for name in ("qwen3", "llama3"):
        refs[name] = Tokenizer.from_file(os.path.join(args.shared, "testdata", "tokenizers", name,
                                                      "tokenizer.json"))
    base = base_texts()
    multi = ""
    for name, raw in base:
        if _is_bad(raw) or name.startswith("sp_") or name.startswith("repeated_"):
            continue
        multi += raw.decode("utf-8") + "\n"
        if len(refs["qwen3"].encode(multi, add_special_tokens=False).ids) >= 1000:
            break
    cases = base + random_texts(base, 100) + [("bench_prompt", BENCH_PROMPT.encode()),
                                              ("bench_prompt_multilingual", multi.encode())]
    names = [n for n, _ in cases]
    assert len(set(names)) == len(names), "duplicate case names"

    tiny_path = os.path.join(OUT, "tiny_bpe", "tokenizer.json")
    corpus_strings = [b.decode("utf-8", "replace") for _, b in cases[:-2]] + [BENCH_PROMPT] * 3
    tiny = save_tiny_bpe(corpus_strings, tiny_path)
    tiny = Tokenizer.from_file(tiny_path)  # exactly what the C++ side will read

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for name, raw in cases + [("tiny_" + str(i), t.encode()) for i, t in enumerate(TINY_TEXTS)]:
            text = raw.decode("utf-8", "replace")
            row = {"name": name, "hex": raw.hex()}
            norm = refs["qwen3"].normalizer.normalize_str(text)
            if norm != text:
                row["qwen3_nfc"] = norm  # what decode(encode(x)) gives back with NFC
            toks = [("tiny_bpe", tiny)] if name.startswith("tiny_") else list(refs.items()) + [("tiny_bpe", tiny)]
            for tname, tok in toks:
                plain, special = encode_both(tok, text)
                row[tname] = plain
                row[tname + "_special"] = special
            f.write(json.dumps(row, ensure_ascii=True) + "\n")
    if os.path.exists(args.smollm2):
        smol = smollm2_reference(args.smollm2)
        with open(os.path.join(OUT, "smollm2.jsonl"), "w", encoding="utf-8") as f:
            for name, raw in cases:
                plain, special = encode_both(smol, raw.decode("utf-8", "replace"))
                f.write(json.dumps({"name": name, "hex": raw.hex(), "smollm2": plain,
                                    "smollm2_special": special}, ensure_ascii=True) + "\n")
    else:
        print(f"note: {args.smollm2} not found; smollm2.jsonl left as it is", file=sys.stderr)
    with open(os.path.join(OUT, "bench_prompt.txt"), "w", encoding="utf-8") as f:
        f.write(BENCH_PROMPT)
    with open(os.path.join(OUT, "bench_prompt_multilingual.txt"), "w", encoding="utf-8") as f:
        f.write(multi)
    n_bench = len(refs["qwen3"].encode(BENCH_PROMPT, add_special_tokens=False).ids)
    print(f"{len(cases)} corpus texts + {len(TINY_TEXTS)} tiny-tokenizer texts; "
          f"bench prompt = {n_bench} qwen3 tokens; tokenizers {tokenizers.__version__}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
