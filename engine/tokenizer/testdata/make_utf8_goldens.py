"""Writes utf8_replace.json: byte strings and what Python's bytes.decode("utf-8", errors="replace")
makes of them. HF tokenizers decodes with Rust's String::from_utf8_lossy, which replaces the same
maximal subparts, so these are the expected results of Decode on byte tokens.

Run from this folder: python3 make_utf8_goldens.py
"""
import json
import random

# Fragments that exercise every branch: valid 1-4 byte sequences, truncations, overlongs,
# surrogates, out-of-range code points, stray continuation bytes and invalid lead bytes.
FRAGMENTS = [
    b"a", b" ", b"\x00", b"\x7f",
    "é".encode(), "€".encode(), "😀".encode(), "\U0010ffff".encode(), "\ud7ff".encode(), "\ue000".encode(),
    b"\xc3", b"\xe2\x82", b"\xe2", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xf0",
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xe0\x9f\xbf", b"\xf0\x8f\xbf\xbf",
    b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xed\x9f\xbf", b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf\xbf",
    b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80", b"\xfe", b"\xff", b"\xe0\xa0", b"\xf4\x8f",
]


def main():
    rng = random.Random(20261129)
    cases = [bytes([b]) for b in range(256)]
    cases += [f for f in FRAGMENTS]
    for _ in range(300):
        cases.append(b"".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 6))))
    for _ in range(100):
        cases.append(bytes(rng.randrange(256) for _ in range(rng.randint(1, 12))))
    out = [{"hex": c.hex(), "decoded": c.decode("utf-8", errors="replace")} for c in cases]
    with open("utf8_replace.json", "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(o) for o in out) + "\n]\n")


if __name__ == "__main__":
    main()
