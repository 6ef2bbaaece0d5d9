"""Writes hf_crosscheck.json: random strings that mix scripts, whitespace of every kind, combining
marks, number forms, contractions, emoji and special-token fragments, encoded by HF `tokenizers`
with the Qwen3 tokenizer, the tiny one, and the Qwen3 vocabulary under the Qwen3.5 Split regex
(spec §4.2); and random id sequences decoded by HF with and without skipping special tokens.

Needs `tokenizers`; run from this folder with the oracle folder as argument:
    python3 make_hf_crosscheck.py ../../../../shared/oracle
"""
import json
import random
import sys

import tokenizers
from tokenizers import Tokenizer

QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

POOLS = {
    "ascii": list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    "digits": list("0123456789") + ["٣", "٤", "１", "²", "½", "Ⅻ", "①", "߀", "०"],
    "punct": list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~") + ["«", "»", "—", "…", "、", "。", "¿", "€", "©", "\u00ad"],
    "space": [" ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u2000", "\u2009", "\u200a", "\u3000",
              "\u0085", "\u1680", "\u2028", "\u2029", "\u202f", "\u205f", "\u180e", "\u200b", "\ufeff", "\x1c", "\x1f"],
    "marks": ["\u0300", "\u0301", "\u0308", "\u0327", "\u20dd", "\u093f", "\u094d", "\u0e31", "\u0e48", "\u05b7",
              "\u064e", "\u0670", "\ufe0f", "\u200d", "\u1ab0", "\U000e0100"],
    "letters": list("éßæøåçñüÆΩπЖжЯяئبتअकखกขあアカ漢字한국ㄱᄀ각ƒǅǈſKİıŉ")
    + ["\u1100\u1161", "e\u0301", "\u212b", "A\u030a", "\U0001d518", "\U00020000"],
    "emoji": ["😀", "👍🏽", "👨\u200d👩\u200d👧", "🏳️\u200d🌈", "❤️", "🇫🇷", "\U0001fae0"],
    "contractions": ["'s", "'S", "'t", "'re", "'RE", "'ve", "'m", "'ll", "'LL", "'d", "'D", "'ſ", "'x", "'"],
    "special": ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|im_start",
                "|>", "<", "<|fim_prefix|>"],
    "control": ["\x00", "\x01", "\x7f", "\x1b", "\x08"],
}


def random_strings(rng):
    names = list(POOLS)
    out = []
    for _ in range(800):
        weights = [rng.random() for _ in names]
        out.append("".join(rng.choice(POOLS[rng.choices(names, weights)[0]]) for _ in range(rng.randint(1, 20))))
    for _ in range(20):
        out.append(rng.choice(POOLS["letters"] + POOLS["ascii"]) * rng.randint(50, 300))
        out.append(" " * rng.randint(1, 40) + rng.choice(["x", "\n", "5", "!", ""]) + " " * rng.randint(0, 40))
    return out


def random_id_sequences(rng, vocab_size, first_added):
    out = []
    for _ in range(500):
        out.append([rng.choice([rng.randrange(vocab_size), rng.randrange(256), rng.randrange(first_added, vocab_size),
                                rng.randrange(100000, first_added)]) for _ in range(rng.randint(1, 12))])
    return out


def main():
    oracle = sys.argv[1]
    rng = random.Random(20261129)
    with open(f"{oracle}/qwen3-tokenizer/tokenizer.json", encoding="utf-8") as f:
        qwen3_json = f.read()
    doc = json.loads(qwen3_json)
    doc["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = QWEN35_REGEX
    toks = {
        "qwen3": Tokenizer.from_str(qwen3_json),
        "tiny": Tokenizer.from_file(f"{oracle}/tiny-qwen36-moe-4bit/tokenizer.json"),
        "qwen3_vocab_qwen35_regex": Tokenizer.from_str(json.dumps(doc)),
    }
    strings = random_strings(rng)
    qwen3 = toks["qwen3"]
    id_seqs = random_id_sequences(rng, qwen3.get_vocab_size(with_added_tokens=True), 151643)
    out = {
        "tokenizers": tokenizers.__version__,
        "qwen35_regex": QWEN35_REGEX,
        "strings": strings,
        "ids": {name: [tk.encode(s, add_special_tokens=False).ids for s in strings] for name, tk in toks.items()},
        "qwen3_id_sequences": id_seqs,
        "qwen3_decoded": [qwen3.decode(ids, skip_special_tokens=False) for ids in id_seqs],
        "qwen3_decoded_skip_special": [qwen3.decode(ids, skip_special_tokens=True) for ids in id_seqs],
    }
    with open("hf_crosscheck.json", "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
