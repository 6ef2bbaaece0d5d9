#!/bin/bash
# run-fw3.sh: the register-A tiles' late copies (GEMM_RA_LATE_LOAD) end to
# end, after fw2 measured the 256-row tile 9-13 % faster with them and the
# 160-row slower: HEAD's petal against two builds of it, `late` (the bit
# set 4: the 256-row tiles only) and `lateall` (7: the 64-, 128- and
# 256-row tiles), each on cubins of its own PTX (only the families whose
# PTX differs from the tree's are remade); and delta=tf32frag (fw2: 586 µs
# against tf32's 613 at 4096 tokens, bit for bit) on HEAD and on late.
#   1. the cubins; TestMeasureGEMM of w64rp, w128rp and w256rp on HEAD's
#      and on lateall's (same call, so before and after), and w256rs with
#      its producer three k-tiles ahead (22bdac3) and its bit-for-bit test; TestCubinsLoad
#      of lateall (its entries are the ones fw2's late build passed its
#      GEMM tests with, PTX compared entry by entry); where CARRY has
#      ref.txz, the oracle under lateall's defaults and delta=tf32frag
#      (lateall's 256-row entries are late's);
#   2. prefill of 512 / 4K / 16K tokens, three runs a length, of HEAD,
#      HEAD with delta=tf32frag, late, late with delta=tf32frag, and
#      lateall, in ROUNDS (default 3) alternating rounds.
# From the repository root; $CARRY (default devrun/fw): petals.txz (petal,
# petal-late, petal-lateall), cuda.test.xz, cuda-lateall.test.xz,
# ptx-late.txz, ptx-lateall.txz (variant-pack.sh), ref.txz if the oracle
# is to run. About 5 minutes. Logs in $OUT: logs-1.tgz, logs.tgz, ptxas.tgz,
# sass.tgz (the variants' cubin folders).
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/fw}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D" && (cd "$D" && tar xJf petals.txz)
[ -f "$D/ref.txz" ] && unpack_oracle "$D" "$R"
gpu_env "$O/env.txt"
start=$(date +%s)
rm -rf /tmp/s1 && cp -r engine/cuda/kernels/sass /tmp/s1
# a family of the five whose committed cubin is not of the tree's PTX (w256rs's
# producer three k-tiles ahead, 22bdac3) remade into /tmp/s1
for fam in gemm_wg gemm_fit gemm_downbf gemm_fitw gemm_ws; do
  grep -q "^$fam [a-z0-9_]* $(sha256sum engine/cuda/kernels/$fam.ptx | cut -d' ' -f1) " /tmp/s1/manifest.txt || new_cubin /tmp/s1 $fam $O
done
variant_cubins $D late $O
variant_cubins $D lateall $O
(cd /tmp && tar czf $O/sass.tgz s-late s-lateall) && (cd $O && tar czf ptxas.tgz late lateall && rm -rf late lateall)
measure_gemm() {  # TESTBIN SASS LOG [TILES]
  (cd engine/cuda && PETAL_CUDA_SASS=$2 PETAL_CUDA_BENCH=1 PETAL_MEASURE_TILES=${4:-w64rp,w128rp,w256rp} timeout 120 \
    $1 -test.v -test.run '^TestMeasureGEMM$' > $3 2>&1)
  echo "TestMeasureGEMM $(basename $1): rc=$?"; grep -E "^ *gemm_test.go:[0-9]+: (dense|moe T=4096 skew)" $3 | cut -c1-200 | head -16
}
measure_gemm $D/cuda.test /tmp/s1 $O/measure-gemm.txt w64rp,w128rp,w256rp,w256rs
cuda_tests /tmp/s1 $D/cuda.test 'TestGEMMProducerMatchesUndrained' $O/tests-ws.txt
measure_gemm $D/cuda-lateall.test /tmp/s-lateall $O/measure-gemm-lateall.txt
cuda_tests /tmp/s-lateall $D/cuda-lateall.test 'TestCubinsLoad' $O/tests-lateall.txt
if [ -d "$D/oracle" ]; then
  (cd engine/cuda && PETAL_CUDA_SASS=/tmp/s-lateall PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle timeout 100 $D/cuda-lateall.test -test.v \
    -test.run 'TestOracleOnGPU/(defaults|delta=tf32frag)$' > $O/oracle-lateall.txt 2>&1)
  echo "oracle (lateall): rc=$?"; grep -E '^ *--- ' $O/oracle-lateall.txt | head -12
  grep -E 'top-1' $O/oracle-lateall.txt | sed 's/.*: seq/seq/; s/.*: chat/chat/' | cut -c1-150 | head -10
fi
echo "part 1: $(( $(date +%s) - start )) s"
pack_out "$O" && mv $O/logs.tgz $O/logs-1.tgz  # kept should the rounds be cut short
for round in $(seq 1 "${ROUNDS:-3}"); do
  for run in petal:s1:cuda petal:s1:cuda:delta=tf32frag petal-late:s-late:cuda petal-late:s-late:cuda:delta=tf32frag petal-lateall:s-lateall:cuda; do
    b=${run%%:*} rest=${run#*:}; s=${rest%%:*} be=${rest#*:}
    PETAL_CUDA_SASS=/tmp/$s BENCH_LIMIT=50 bench_run $D/$b $O "$round-$b-$(tag_of "$be")" "$be" --max-context 17000 \
      --prompt-lengths 512,4K,16K --context-lengths 256 --decode-tokens 4 --repeats 3 --floors=false
  done
done
echo "all: $(( $(date +%s) - start )) s"
pack_out "$O"
