#!/usr/bin/env python3
"""Deterministic multilingual corpus for the tokenizer oracle test.

Writes tests/tokenizer/data/corpus.jsonl: one JSON string per line. The lines mix
the cases where a byte-level BPE tokenizer can disagree with HF tokenizers: English
prose, code, CJK, emoji (ZWJ sequences, flags, skin tones), combining marks and
decomposed text (NFC), Arabic/Hebrew/Hindi/Thai/Cyrillic/Greek, CRLF, tabs, exotic
Unicode whitespace, long digit runs, contractions in any case, special tokens inside
text, leading/trailing spaces, and random mixes of all of those.

Usage: python3 tools/tokenizer/make_corpus.py [out.jsonl]
Then:  "$(scripts/venv-path)/bin/python" tools/python/tokenizer_oracle.py golden
       (HF tokenizers from PyPI; writes qwen3_golden.jsonl)
"""
import json
import os
import random
import sys

SEED = 20260101
N_LINES = 2600

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Call me Ishmael. Some years ago, never mind how long precisely, I thought I would sail about a little.",
    "Reinforcement learning from verifiable rewards trains the policy on answers a program can check.",
    "She said, \"I don't know; we'll see what they're doing tomorrow.\"",
    "In 1969, Apollo 11 landed on the Moon; 600 million people watched.",
    "The committee's report (published in March) runs to 1,234 pages.",
    "Whether 'tis nobler in the mind to suffer the slings and arrows of outrageous fortune...",
    "E-mail me at someone@example.com or visit https://example.org/path?q=1&r=2#frag.",
    "Prices rose by 3.75% year-over-year, while wages grew only 2.1%.",
    "HELLO WORLD! THIS IS A TEST OF UPPER-CASE TEXT, ISN'T IT?",
    "Mr. O'Neil and Dr. McAllister couldn't've known about the y'all situation.",
    "We're here, they've gone, I'm tired, you'll see, he'd know, it's fine.",
    "Tokenizers split text into pieces; BPE merges the most frequent pairs first.",
    "A  double  spaced   sentence    with     growing      gaps.",
    "Ellipses... em-dashes -- and en-dashes – and em — all appear in prose.",
]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <vector>\nint main() { std::vector<int> v{1, 2, 3}; return v.size(); }",
    "const f = async (x) => { await sleep(100); return x ?? 'default'; };",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "if __name__ == \"__main__\":\r\n    main()\r\n",
    "  x = [i**2 for i in range(10) if i % 2 == 0]  # squares\n",
    "$ ls -la /usr/local/bin | grep -E '^d' && echo \"done\" >> log.txt",
    "<div class=\"row\"><span id='a'>Hi</span></div>\n",
    "fn main() {\n    let s: &str = \"hello\";\n    println!(\"{s}\");\n}\n",
    "\t\tcase 'a': return x->y[0] != NULL ? *p : ~q;\n",
    "matrix = np.zeros((3, 4), dtype=np.float32)\t# 3x4\n",
    "        \n    \n\t\n",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;",
]

CJK = [
    "我们今天去公园散步，天气很好。",
    "人工智能正在改变世界，大型语言模型尤其如此。",
    "東京は日本の首都です。ひらがなとカタカナ、そして漢字。",
    "コンピューターサイエンスを勉強しています。",
    "안녕하세요, 만나서 반갑습니다. 한국어 텍스트입니다.",
    "「引用」と『二重引用』、そして（括弧）。",
    "価格は１２３４円です。全角数字ＡＢＣ。",
    "中文标点：逗号，句号。问号？感叹号！",
    "繁體中文與简体中文混合使用。",
]

OTHER_SCRIPTS = [
    "مرحبا بالعالم، هذه جملة عربية مع أرقام ١٢٣٤٥.",
    "שלום עולם, זה משפט בעברית.",
    "नमस्ते दुनिया, यह हिंदी वाक्य है। संख्या १२३४",
    "สวัสดีครับ นี่คือภาษาไทย",
    "Привет, мир! Это предложение на русском языке.",
    "Γειά σου Κόσμε! Αυτή είναι μια ελληνική πρόταση.",
    "Ελληνικά ΚΕΦΑΛΑΙΑ και Ὀδυσσεύς.",
    "Українська мова: ґ, є, ї, і.",
    "Türkçe: İstanbul, ığdır, şişe, çiçek.",
    "Tiếng Việt có nhiều dấu: Trường học, người, đường.",
    "ქართული ენა და Հայերեն լեզու",
    "አማርኛ ቋንቋ",
    "தமிழ் மொழி மற்றும் తెలుగు భాష",
]

EMOJI = [
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇯🇵🇫🇷", "1️⃣", "❤️", "🧑🏿‍💻", "👩‍❤️‍💋‍👨",
    "🐱‍👤", "⭐", "🤖", "🎉🎉🎉", "☕️", "🏴‍☠️", "🫠", "✊🏼",
]

COMBINING = [
    "e\u0301", "a\u0308", "o\u0302\u0323", "n\u0303", "A\u030a", "\u1100\u1161\u11a8",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f",
    "q\u0307\u0323", "\u0915\u094d\u0937", "ﬁ", "Å", "Ω", "Ǆ", "ẛ\u0323", "\u212b",
    "caf\u00e9 vs cafe\u0301", "\u0041\u030a\u0301",
]

# Unicode whitespace and near-whitespace: where regex engines most often disagree.
SPACES = [
    " ", "  ", "\t", "\n", "\r\n", "\r", "\u000b", "\u000c", "\u0085", "\u00a0", "\u1680",
    "\u2000", "\u2002", "\u2003", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f",
    "\u3000", "\u180e", "\u200b", "\ufeff", "\u001c", "\u001f", " \n", "\n ", " \t ",
    "\n\n\n", "\r\n\r\n", "  \n  ",
]

SPECIALS = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|vision_start|>", "<tool_response>",
    # Near misses that must not match.
    "<|im_start", "|im_end|>", "<think", "< think>", "<|IM_START|>", "<|im_start |>",
]

CONTRACTION_BASES = ["it", "he", "they", "we", "you", "I", "JOHN", "Ann", "x", "1", "", " "]
CONTRACTION_TAILS = ["s", "t", "re", "ve", "m", "ll", "d"]

NUMBER_FORMS = [
    "3.14159265358979323846", "1,000,000", "-42", "+7", "0x1F", "1e-9", "２０２４", "١٢٣",
    "४२", "½", "²³", "Ⅻ", "①②", "𝟙𝟚", "৩", "١٢٣٤٥٦٧٨٩٠",
]


def vary_case(rng, s):
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in s)


def digits(rng, n):
    return "".join(rng.choice("0123456789") for _ in range(n))


def contraction(rng):
    base = rng.choice(CONTRACTION_BASES)
    tail = vary_case(rng, rng.choice(CONTRACTION_TAILS))
    quote = rng.choice(["'", "'", "'", "\u2019"])
    after = rng.choice(["", " ", "s", "x", ".", "\n", "'"])
    return base + quote + tail + after


def random_bmp_text(rng, n):
    # Blocks assigned since Unicode 6 or earlier, so every engine's tables agree.
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF),
              (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE5B), (0x1100, 0x11FF),
              (0x2000, 0x206F), (0x2190, 0x22FF), (0x3040, 0x30FF), (0x4E00, 0x9FA5),
              (0xAC00, 0xD7A3), (0xFF00, 0xFFEF), (0x1F300, 0x1F5FF)]
    out = []
    for _ in range(n):
        lo, hi = rng.choice(blocks)
        cp = rng.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        out.append(chr(cp))
    return "".join(out)


def chunk(rng):
    kind = rng.randrange(12)
    if kind == 0:
        return rng.choice(PROSE)
    if kind == 1:
        return rng.choice(CODE)
    if kind == 2:
        return rng.choice(CJK)
    if kind == 3:
        return rng.choice(OTHER_SCRIPTS)
    if kind == 4:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4)))
    if kind == 5:
        return rng.choice(COMBINING)
    if kind == 6:
        return rng.choice(SPACES)
    if kind == 7:
        return rng.choice(SPECIALS)
    if kind == 8:
        return contraction(rng)
    if kind == 9:
        return digits(rng, rng.randint(1, 40))
    if kind == 10:
        return rng.choice(NUMBER_FORMS)
    return random_bmp_text(rng, rng.randint(1, 12))


def structured_lines(rng):
    """Hand-shaped lines, each aimed at one behaviour."""
    lines = ["", " ", "  ", "\n", "\r\n", "\t", "a", " a", "a ", "  leading", "trailing  ",
             " \t mixed \t whitespace \t ", "x\r\ny\rz\n", "line1\r\n\r\nline3\r\n"]
    lines += PROSE + CODE + CJK + OTHER_SCRIPTS + COMBINING + NUMBER_FORMS
    lines += ["".join(EMOJI), " ".join(EMOJI)]
    for space in SPACES:
        lines += [f"a{space}b", f"a {space} b", f"{space}x", f"x{space}", f"{space}{space}!",
                  f"1{space}2", f"'s{space}'S", f"word{space}{space}word"]
    for tail in CONTRACTION_TAILS:
        # dict.fromkeys: unique in a fixed order (a set's order changes with hash seeds).
        for variant in dict.fromkeys((tail, tail.upper(), tail.capitalize(), tail[::-1])):
            lines += [f"it'{variant}", f"IT'{variant} ok", f"'{variant}", f" '{variant}x",
                      f"don'{variant}'{variant}"]
    lines += ["x'\u017f", "x'\u017fy", "'\u212a", "'\u0130", "'\u0131", "it\u2019s", "''s"]
    for n in (1, 2, 3, 4, 10, 50, 200, 1000):
        lines.append(digits(rng, n))
        lines.append("v" + digits(rng, n) + "." + digits(rng, 3))
    for special in SPECIALS:
        lines += [special, f"hi{special}there", f" {special} ", f"{special}{special}",
                  f"\n{special}\n", f"a{special}b{special}c", f"<{special}>",
                  f"user: {special}system\nhello<|im_end|>"]
    lines.append("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n"
                 "What's 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nEasy.\n</think>\n\n4"
                 "<|im_end|><|endoftext|>")
    lines.append(" " * 300 + "x")
    lines.append("\n" * 100)
    lines.append("\t" * 64 + "tabbed")
    lines.append("ab" * 500)
    lines.append("😀" * 200)
    lines.append(" ".join(PROSE) * 3)
    return lines


def random_lines(rng, count):
    lines = []
    for _ in range(count):
        parts = [chunk(rng) for _ in range(rng.randint(1, 8))]
        sep = rng.choice(["", " ", "", "\n", " "])
        line = sep.join(parts)
        if rng.random() < 0.15:
            line = rng.choice([" ", "  ", "\t", "\n"]) + line
        if rng.random() < 0.15:
            line = line + rng.choice([" ", "  ", "\t", "\n", "\r\n"])
        lines.append(line)
    return lines


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        root, "tests/tokenizer/data/corpus.jsonl")
    rng = random.Random(SEED)
    lines = structured_lines(rng)
    lines += random_lines(rng, N_LINES - len(lines))
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"wrote {len(lines)} lines ({os.path.getsize(out)} bytes) to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
