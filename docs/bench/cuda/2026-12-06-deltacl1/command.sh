#!/bin/bash
# From the repository root on the GPU machine (an H100 came), five calls on
# one warm machine, carry ["devrun/dc"] (cuda.test.xz, driver.test.xz and
# petal.xz (-tags nofixture) of 40bf316). The tests' own logs of the first
# call did not come back (too many files); verify13 ran them again.
# 1. tests, TestMeasureDeltaForms, TestMeasureRouter, the cubins (sass.tgz,
#    its manifest kept here as sass-manifest.tgz), ptxas -v of route_i8 and
#    gemm_fit, one round of benches (benches.tgz)
bash docs/bench/cuda/run-deltacl1.sh
# 2. a second round (benches2.tgz)
R=$(pwd); O=$OUT; D=$R/devrun/dc; . docs/bench/cuda/lib.sh; unpack_devrun "$D"
for be in cuda:router=i8 cuda cuda:moefit=on; do bench_run "$D/petal" "$O" "2-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512,2K,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 2 --floors=false; done
for be in cuda:gdnnorm=cluster cuda; do bench_run "$D/petal" "$O" "2-decode-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512 --context-lengths 256,4K,16K --decode-tokens 64 --floors=false; done
(cd $O && tar czf benches2.tgz bench-* && rm -f bench-*)
# 3. the MoE's tiles (gemm.txt.gz; the lines of 2048 and 4096 tokens are the ones read)
(cd engine/cuda && PETAL_CUDA_BENCH=1 timeout 170 ../../devrun/dc/cuda.test -test.v -test.run 'TestMeasureGEMM' > $OUT/gemm.txt 2>&1)
# 4. --profile at 2K and 4K (profiles.tgz)
for be in cuda cuda:moefit=on cuda:moefit=on,router=i8; do timeout 100 $D/petal bench --backend $be --synthetic qwen3.6-35b-a3b --max-context 5000 --prompt-lengths 2K,4K --context-lengths 256 --decode-tokens 4 --floors=false --profile > $O/profile-$(tag_of $be).txt 2>&1; done
(cd $O && tar czf profiles.tgz profile-* && rm -f profile-*)
# 5. the old defaults against router=i8,moefit=on,gdnnorm=cluster, two rounds (benches3.tgz)
for round in 1 2; do for be in cuda cuda:router=i8,moefit=on,gdnnorm=cluster; do bench_run "$D/petal" "$O" "3-$round-$(tag_of $be)" $be --max-context 17000 --prompt-lengths 512,2K,4K,16K --context-lengths 256,4K,16K --decode-tokens 64 --repeats 2 --floors=false; done; done
(cd $O && tar czf benches3.tgz bench-* && rm -f bench-*)
