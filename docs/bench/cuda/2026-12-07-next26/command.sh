# an H100, 5b31387's run-next26.sh at 3a698df (the same scripts), carry
# devrun/ep (petal and cuda.test of 3a698df, petal-lean 17596f8 and
# petal-stf32 4c8ba27 with their PTX and test binaries, as run-epi1.sh's
# header says); the tree's logs, results, tokenizer test data and PTX but
# the gemm families', qk_rows.ptx and route_i8.ptx left out of the call.
# epi1.tgz without its 3 MB of cubins (the stf32 ones that landed are in
# engine/cuda/kernels/sass).
bash docs/bench/cuda/run-next26.sh
