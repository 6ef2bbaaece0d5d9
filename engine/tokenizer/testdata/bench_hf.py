"""Times HF `tokenizers` encoding the text of petal's BenchmarkEncode, on one thread, and checks
its ids against the ones petal wrote.

Write the text (and petal's ids of it) from the repository root:
    PETAL_TOKENIZER_BENCH_TEXT=/tmp/bench.txt go test -run TestWriteBenchText ./engine/tokenizer/
then, with `pip install tokenizers`:
    python3 engine/tokenizer/testdata/bench_hf.py ../shared/oracle/qwen3-tokenizer/tokenizer.json /tmp/bench.txt

It compares with /tmp/bench.txt.qwen3-ids.json when that file exists.
"""
import json
import os
import sys
import time

# One thread, to compare with Go's one-core benchmark; set before tokenizers starts its pool.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench_hf.py TOKENIZER_JSON TEXT_FILE")
    tok_path, text_path = sys.argv[1], sys.argv[2]
    with open(text_path, encoding="utf-8", newline="") as f:
        text = f.read()
    size = len(text.encode("utf-8"))

    start = time.perf_counter()
    tk = tokenizers.Tokenizer.from_file(tok_path)
    load = time.perf_counter() - start

    times = []
    ids = None
    for _ in range(5):
        start = time.perf_counter()
        ids = tk.encode(text, add_special_tokens=False).ids
        times.append(time.perf_counter() - start)
    print(f"tokenizers {tokenizers.__version__}: load {load * 1e3:.0f} ms; {size} bytes -> {len(ids)} ids")
    print(f"encode as one text: first pass {size / times[0] / 1e6:.2f} MB/s, best of the next {len(times) - 1} "
          f"{size / min(times[1:]) / 1e6:.2f} MB/s (MB = 1e6 bytes, as Go's benchmark)")

    # The same text as lines, like BenchmarkEncodeLines: HF's per-text overhead differs from Go's.
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    line_times = []
    for _ in range(3):
        start = time.perf_counter()
        tk.encode_batch(lines, add_special_tokens=False)
        line_times.append(time.perf_counter() - start)
    print(f"encode as {len(lines)} lines (encode_batch, one thread): best of {len(line_times)} "
          f"{size / min(line_times) / 1e6:.2f} MB/s")

    ids_path = text_path + ".qwen3-ids.json"
    if os.path.exists(ids_path):
        with open(ids_path) as f:
            petal = json.load(f)
        first = next((i for i, (a, b) in enumerate(zip(ids, petal)) if a != b), None)
        if first is None and len(ids) == len(petal):
            print(f"ids identical to petal's ({len(ids)})")
        else:
            at = first if first is not None else min(len(ids), len(petal))
            print(f"ids DIFFER from petal's: lengths {len(ids)} vs {len(petal)}, first difference at {at}: "
                  f"HF {ids[at:at + 8]} petal {petal[at:at + 8]}")
            sys.exit(1)


if __name__ == "__main__":
    main()
