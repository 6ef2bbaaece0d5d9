#!/bin/bash
# run-late1.sh: the 256-row register-A tiles with their copies queued late
# (GEMM_RA_LATE_LOAD=4, run-fw3.sh's `late`) against ../shared/oracle, as a
# default would be: gemm_wg's cubin made from that build's PTX into a copy
# of the tree's, then TestCubinsLoad and TestOracleOnGPU under the defaults
# and delta=tf32frag with that build's test binary.
# From the repository root; $CARRY (default devrun/rc) holds
# cuda-late.test.xz and ptx-late.txz (variant-pack.sh) and ref.txz. Under a
# minute. Logs in $OUT: late1.tgz, sass-late.tgz (gemm_wg's cubin and the
# manifest).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/rc}; mkdir -p "$O/late1"
. docs/bench/cuda/lib.sh
mkdir -p "$D/oracle" && tar xf "$D/ref.txz" -C "$D/oracle" && ln -sfn "$R/fixtures/tiny-qwen36-moe-4bit" "$D/oracle/tiny-qwen36-moe-4bit"
(cd $D && tar xJf ptx-late.txz && xz -dc cuda-late.test.xz > cuda-late.test && chmod +x cuda-late.test)
rm -rf /tmp/sl && cp -r engine/cuda/kernels/sass /tmp/sl
new_cubin /tmp/sl gemm_wg $O/late1 $D/ptx-late/gemm_wg.ptx
cuda_tests /tmp/sl $D/cuda-late.test 'TestCubinsLoad' $O/late1/tests.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/sl PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda-late.test -test.v \
  -test.run 'TestOracleOnGPU/(defaults|delta=tf32frag)$' > $O/late1/oracle.txt 2>&1)
echo "oracle: rc=$?"; grep -E '^ *--- ' $O/late1/oracle.txt | head -12; grep -E 'top-1' $O/late1/oracle.txt | sed 's/.*: seq/seq/; s/.*: chat/chat/' | cut -c1-150 | head -10
(cd /tmp && tar czf $O/sass-late.tgz sl/gemm_wg.sm_90a.cubin.gz sl/manifest.txt)
(cd $O && tar czf late1.tgz late1 && rm -rf late1)
