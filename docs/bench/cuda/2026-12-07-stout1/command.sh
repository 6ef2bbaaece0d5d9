# an H100, right after router7 on the same machine; carry devrun/so: cuda.test and petal of 8022cb7, petal-stout and cuda-stout.test of cecfc9a (GEMM_RA_STAGED_OUT=1 on 8022cb7):
#   C=$(bash docs/bench/cuda/variant-pack.sh devrun/so stout GEMM_RA_STAGED_OUT=1)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/so petal=HEAD petal-stout=$C
# the tree's logs, results, tokenizer test data and PTX but the gemm families' left out
bash docs/bench/cuda/run-stout1.sh
