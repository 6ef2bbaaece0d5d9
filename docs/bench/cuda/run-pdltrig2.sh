#!/bin/bash
# run-pdltrig2.sh: the kernels of 91116bc, no longer on main (e3faf30 went
# back to c8c01a2's until they are measured): no kernel lets the next one
# launch at its start; pdl_trigger before a last block's tail, else the
# blocks' retiring, lets it. Also petal-md, the same with moe_down letting
# the next layer's qmv_group_norm launch at its start (pdllate1's trace:
# the one kernel the late triggers cost). Makes the cubins of 91116bc's
# PTX (and of petal-md's moe.ptx), runs conformance and TestCubinsLoad on
# them, then prefill of 512 and 4K tokens and decode at 4K and 32K under
# pdl=on and pdl=some
# for both builds and main's (c8c01a2) default, two alternating rounds, and
# a kernel trace of each build under pdl=on (about 5 minutes in all). It
# leaves devrun/pt2/rep ready for the report on the same warm machine:
# CARRY=devrun/pt2/rep bash docs/bench/cuda/run-report16.sh (petal
# c8c01a2, petal-old dfa76fa). From the repository root; devrun/pt2 as its
# BUILT_FROM says. Logs in $OUT (logs.tgz; sass.tgz: 91116bc's cubins;
# sass-md.tgz: petal-md's moe cubin and its manifest).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/pt2; mkdir -p "$O" /tmp/k
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
(cd "$D" && tar xJf petals.txz) && tar xJf "$D/kernels.txz" -C /tmp/k
mkdir -p "$D/rep" && cp "$D/petal-main" "$D/rep/petal" && cp "$D/petal-old" "$D/rep/"
gpu_env "$O/env.txt"
s=$(date +%s)
mv /tmp/k/moe-md.ptx /tmp/moe-md.ptx
PATH=$PATH:/usr/local/cuda/bin sh /tmp/k/sass.sh /tmp/sass > $O/sass.txt 2>&1
echo "sass.sh: rc=$? in $(( $(date +%s) - s )) s"
# petal-md's: 91116bc's cubins with moe's made again from its moe.ptx
cp -r /tmp/sass /tmp/sass-md
/usr/local/cuda/bin/ptxas -arch=sm_90 -O3 /tmp/moe-md.ptx -o /tmp/sass-md/moe.sm_90.cubin &&
  gzip -9 -n -f /tmp/sass-md/moe.sm_90.cubin &&
  sed -i "s/^moe sm_90 [0-9a-f]* /moe sm_90 $(sha256sum /tmp/moe-md.ptx | cut -d' ' -f1) /" /tmp/sass-md/manifest.txt
echo "moe-md: rc=$?; $(grep '^moe ' /tmp/sass-md/manifest.txt)"
cd $R/engine/cuda
PETAL_CUDA_SASS=/tmp/sass PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v -test.run \
  'TestConformance|TestCubinsLoad|TestMeasurePhases' > $O/tests.txt 2>&1
echo "tests: rc=$?"; grep -E '^(--- FAIL|FAIL|ok|PASS)|panic|µs a phase' $O/tests.txt | head -12
echo "top-level: $(grep -c '^--- PASS' $O/tests.txt) passed, $(grep -c '^--- FAIL' $O/tests.txt) failed"
cd $R
for round in 1 2; do
  BENCH_LIMIT=60 bench_run "$D/petal-main" "$O" "$round-main-some" cuda --max-context 40000 --prompt-lengths 512,4K \
    --context-lengths 4K,32K --decode-tokens 64 --floors=false
  for be in cuda:pdl=on cuda; do
    PETAL_CUDA_SASS=/tmp/sass BENCH_LIMIT=60 bench_run "$D/petal" "$O" "$round-$(tag_of $be)" $be --max-context 40000 \
      --prompt-lengths 512,4K --context-lengths 4K,32K --decode-tokens 64 --floors=false
    PETAL_CUDA_SASS=/tmp/sass-md BENCH_LIMIT=60 bench_run "$D/petal-md" "$O" "$round-md-$(tag_of $be)" $be --max-context 40000 \
      --prompt-lengths 512,4K --context-lengths 4K,32K --decode-tokens 64 --floors=false
  done
done
# every kernel of a 512-token prefill and of decode at 4K timed (run-ktrace.sh), both builds under pdl=on
PETAL_CUDA_SASS=/tmp/sass PETAL=$D/petal TAG=kt-on BACKEND=cuda:pdl=on KT_PROMPTS=512 LIMIT=90 \
  bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace on: rc=$?"
PETAL_CUDA_SASS=/tmp/sass-md PETAL=$D/petal-md TAG=kt-md-on BACKEND=cuda:pdl=on KT_PROMPTS=512 LIMIT=90 \
  bash docs/bench/cuda/run-ktrace.sh > /dev/null 2>&1; echo "ktrace md on: rc=$?"
(cd /tmp && tar czf $O/sass.tgz sass && tar czf $O/sass-md.tgz sass-md/moe.sm_90.cubin.gz sass-md/manifest.txt)
pack_out "$O"
