"""Deterministic tokenizer test corpus: many scripts, CJK, emoji, digits, code, whitespace runs, added-token
strings inside text, random code points from every plane, and invalid UTF-8 (as bytes).

Used by test_tokenizer_corpus.py (identity with HF tokenizers) and tools/bench_tokenizer.py (speed).
Each item is `str` (valid text) or `bytes` (input that is not valid UTF-8).
"""
import random

# (first, last) code point ranges of scripts, written as words separated by spaces and punctuation.
SCRIPTS = {
    "latin": [(0x61, 0x7A), (0x41, 0x5A)],
    "latin1": [(0xC0, 0xFF), (0x100, 0x17F)],
    "greek": [(0x391, 0x3A9), (0x3B1, 0x3C9), (0x1F00, 0x1F15)],
    "cyrillic": [(0x410, 0x44F), (0x450, 0x45F)],
    "armenian": [(0x531, 0x556), (0x561, 0x586)],
    "hebrew": [(0x5D0, 0x5EA), (0x591, 0x5A1)],
    "arabic": [(0x621, 0x64A), (0x660, 0x669), (0x64B, 0x652)],
    "devanagari": [(0x905, 0x939), (0x93E, 0x94D), (0x966, 0x96F)],
    "bengali": [(0x985, 0x9B9), (0x9BE, 0x9CC), (0x9E6, 0x9EF)],
    "tamil": [(0xB85, 0xBB9), (0xBBE, 0xBCD)],
    "thai": [(0xE01, 0xE2E), (0xE30, 0xE3A), (0xE50, 0xE59)],
    "tibetan": [(0xF40, 0xF6C), (0xF71, 0xF84)],
    "myanmar": [(0x1000, 0x102A), (0x102B, 0x103E)],
    "georgian": [(0x10D0, 0x10FA)],
    "hangul": [(0xAC00, 0xD7A3), (0x1100, 0x1112)],
    "ethiopic": [(0x1200, 0x1248)],
    "khmer": [(0x1780, 0x17B3), (0x17B6, 0x17D3)],
    "mongolian": [(0x1820, 0x1877)],
    "hiragana": [(0x3041, 0x3096), (0x3099, 0x309F)],
    "katakana": [(0x30A1, 0x30FA), (0x30FC, 0x30FF), (0xFF66, 0xFF9D)],
    "cjk": [(0x4E00, 0x9FA5), (0x9FA6, 0x9FFF)],
    "cjk_ext": [(0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2EBF0, 0x2EE5D), (0x31350, 0x323AF)],
    "fullwidth": [(0xFF01, 0xFF5E), (0x3000, 0x303F)],
    "emoji": [(0x1F600, 0x1F64F), (0x1F300, 0x1F5FF), (0x1F900, 0x1F9FF), (0x2600, 0x26FF)],
    "math": [(0x2200, 0x22FF), (0x1D400, 0x1D7FF), (0x2190, 0x21FF)],
    "box": [(0x2500, 0x257F), (0x2580, 0x259F)],
    "combining": [(0x300, 0x36F), (0x1AB0, 0x1ACE), (0x20D0, 0x20F0)],
    "new_scripts": [(0x11F00, 0x11F59), (0x105C0, 0x105F3), (0x10D40, 0x10D8F), (0x16D40, 0x16D79), (0x1E4D0, 0x1E4F9)],
    "digits": [(0x30, 0x39), (0x660, 0x669), (0x6F0, 0x6F9), (0xFF10, 0xFF19), (0x2460, 0x249B), (0xBC, 0xBE)],
}

PUNCT = list(".,;:!?-–—()[]{}<>\"'`~@#$%^&*_=+|\\/…«»“”‘’、。，！？：；（）【】")
SPACES = [" ", " ", " ", "  ", "\t", "\n", "\r\n", "\n\n", "   ", "\u00a0", "\u3000", "\u2028", "\x85", "\u200b", "\x0b", "\x0c"]

FIXED = [
    "", " ", "  ", "\n", "\r\n", "\t", "\t\t \n", " \n ", "a", "A", "1", "12", "123", "1234", "12345",
    "12345678901234567890", "3.14159", "1,000,000", "-42", "1e10", "0x1F", "٣٤٥٦", "１２３４", "①②③", "½¾", "²³",
    "don't", "I'm", "we'll", "they've", "it's", "'s", "O'Neil's", "DON'T", "'", "''", "'''",
    "!!!", "...", "?!", "—", "«quote»", "“smart”", "()", "[]{}", "<>", "<<>>", "<|", "|>", "｜", "▁",
    "Hello, world! 123\nsecond line", "你好，世界！ Καλημέρα κόσμε 🌍",
    "def f(x):\n    return x ** 2\n", "if (a && b) { c++; }\n", "#include <stdio.h>\nint main() { return 0; }",
    "http://example.com/path?q=1&r=2#frag", "$HOME/.bashrc", '{"key": [1, 2.5, null, true], "s": "v"}',
    '<div class="x">text</div>', "\\frac{a}{b} + \\sqrt{x^2}", "## Title\n- item 1\n- item 2\n\n> quote",
    "    indented\n\tTabbed\n", "trailing spaces   ", "   leading spaces", "a  b   c    d", "line\r\nline\rline",
    "emoji 👍🏽 family 👨‍👩‍👧‍👦 flag 🇺🇸🇫🇷 keycap 1️⃣ heart ❤️", "e\u0301 n\u0303 a\u030a", "ﬁ ﬂ ǅ ẞ ß İ ı Σσς",
    "\u200d\u200c\u2060\ufeff", "\U000F0000\U0010FFFD", "\ue000\uf8ff", "\ufffd", "\ufffe\uffff", "\x00\x01\x1f\x7f",
]

INVALID = [
    b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80",
    b"\xf8\x88\x80\x80\x80", b"\x80", b"\xbf\x80", b"\xe2\x82", b"\xf0\x9f\x98", b"abc\xe2\x82def", b"\xc3",
    b"hello \xff world", b"\xf0\x9f\x98\x80\xf0\x9f", b"<\xef\xbd\x9cUser\xef\xbd>", b"\xe4\xbd\xa0\xe5\xa5",
]


def _word(rng, ranges, length):
    out = []
    for _ in range(length):
        a, b = rng.choice(ranges)
        out.append(chr(rng.randint(a, b)))
    return "".join(out)


def _sentence(rng, scripts, n_words):
    parts = []
    for _ in range(n_words):
        script = rng.choice(scripts)
        word = _word(rng, SCRIPTS[script], rng.choice([1, 2, 3, 4, 5, 6, 8, 12]))
        if script != "combining" and rng.random() < 0.1:
            word += _word(rng, SCRIPTS["combining"], 1)
        parts.append(word)
        r = rng.random()
        if r < 0.15:
            parts.append(rng.choice(PUNCT))
        if r < 0.05:
            parts.append(rng.choice(PUNCT))
        parts.append(rng.choice(SPACES) if rng.random() < 0.3 else " ")
    return "".join(parts).rstrip(" ") if rng.random() < 0.7 else "".join(parts)


def _random_codepoints(rng, n):
    out = []
    for _ in range(n):
        plane = rng.choice([0, 0, 0, 1, 1, 2, 3, 14, 15, 16])
        cp = rng.randint(plane << 16, (plane << 16) | 0xFFFF)
        if 0xD800 <= cp <= 0xDFFF:
            cp = 0x20
        out.append(chr(cp))
        if rng.random() < 0.2:
            out.append(rng.choice(SPACES + PUNCT + ["a", "1", "X"]))
    return "".join(out)


def _ascii_soup(rng, n):
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" + " " * 12 + "\n\t\r" + "".join(PUNCT[:30])
    return "".join(rng.choice(alphabet) for _ in range(n))


def _invalid_bytes(rng):
    kind = rng.randrange(4)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 24)))
    text = _sentence(rng, ["latin", "cjk", "emoji", "cyrillic"], rng.randint(1, 6)).encode("utf-8")
    if not text:
        text = b"x"
    if kind == 1:  # cut inside a multi-byte sequence
        cut = rng.randint(1, len(text))
        return text[:cut] + bytes([rng.choice([0xE4, 0xF0, 0xC3, 0xED])]) + text[cut:]
    if kind == 2:  # insert stray continuation / invalid leads
        pos = rng.randint(0, len(text))
        return text[:pos] + bytes(rng.choice([0x80, 0xBF, 0xC0, 0xC1, 0xF5, 0xFF]) for _ in range(rng.randint(1, 3))) + text[pos:]
    return text + rng.choice([b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"])


def build_corpus(added_tokens, seed=20260911, size=10000):
    """Returns a list of str/bytes items. `added_tokens`: contents of the tokenizer's added tokens."""
    rng = random.Random(seed)
    items = list(FIXED) + list(INVALID)
    added = sorted(added_tokens)
    specials_named = [t for t in added if "place" not in t] or added
    contexts = ["{}", "x{}y", " {} ", "{}{}", "a {}\n", "{} {}", "<{}>", "{}{}{}", "\n\n{}\n", "{}hello", "123{}456"]
    for _ in range(1200):  # added-token contents inside text, partial and nested forms
        t = rng.choice(specials_named if rng.random() < 0.7 else added)
        ctx = rng.choice(contexts)
        s = ctx.format(*([t] * ctx.count("{}")))
        r = rng.random()
        if r < 0.15 and len(t) > 2:
            s = s.replace(t, t[: rng.randint(1, len(t) - 1)], 1)
        elif r < 0.25:
            s = s.replace(t, t + t[: rng.randint(0, len(t))], 1)
        elif r < 0.35:
            s = _sentence(rng, ["latin", "cjk"], 3) + s + _sentence(rng, ["latin", "emoji"], 2)
        items.append(s)
    for _ in range(300):  # common protocol strings written as plain text too
        items.append(rng.choice(["<think>", "</think>", "<tool_result>", "</tool_result>", "｜DSML｜", "<｜", "｜>"])
                     + _sentence(rng, ["latin"], rng.randint(0, 4)))
    script_names = sorted(SCRIPTS)
    while len(items) < size - 1600:  # text in one or a few scripts
        scripts = rng.sample(script_names, rng.choice([1, 1, 1, 2, 3]))
        if rng.random() < 0.3:
            scripts.append("latin")
        items.append(_sentence(rng, scripts, rng.randint(1, 25)))
    for _ in range(700):
        items.append(_random_codepoints(rng, rng.randint(1, 40)))
    for _ in range(500):
        items.append(_ascii_soup(rng, rng.randint(1, 200)))
    for _ in range(380):
        items.append(_invalid_bytes(rng))
    long_items = [
        " " * 5000, "\n" * 3000, "9" * 3000, "a" * 2000, "ab" * 1500, "é" * 1000, "🌍" * 800, "你好" * 1000,
        " \t" * 1000 + "x", "x" + " " * 2000 + "\n" + " " * 2000 + "y", "-" * 3000, "<｜" * 500,
    ]
    items += long_items
    while len(items) < size:
        items.append(" ".join(_sentence(rng, rng.sample(script_names, 3), 40) for _ in range(8)))
    return items
