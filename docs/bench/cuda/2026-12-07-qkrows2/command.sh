# an H100 (a fresh machine), 21eba24: carry devrun/qk (TEST=HEAD
# devrun-pack.sh devrun/qk petal=HEAD); the tree's logs, results,
# tokenizer test data and PTX but qk_rows.ptx left out of the call
bash docs/bench/cuda/run-qkrows2.sh
