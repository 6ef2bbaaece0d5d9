# an H100; carry devrun/r22 (cuda.test and petal of 9b1b8e2, the oracle's ref.txz); the tree's logs, results, tokenizer test data and PTX but route_i8w.ptx left out
bash docs/bench/cuda/run-router7.sh
