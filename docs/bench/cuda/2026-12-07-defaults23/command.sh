# an H100; carry devrun/r23: cuda.test and petal of 11bc684 (this change before its cubin: router=i8wg the default, route_i8w.cu pruned), the oracle's ref.txz; the tree at 11bc684, its logs, results, tokenizer test data and PTX but route_i8w.ptx left out
bash docs/bench/cuda/run-defaults23.sh
