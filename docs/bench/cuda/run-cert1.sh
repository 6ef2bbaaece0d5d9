#!/bin/bash
# run-cert1.sh: router=cert (route_cert.cu: approximate logits from x in
# two 8-bit parts within a bound of the exact ones, then qgemm_i8's exact
# logit only for the experts the bounds leave in reach of the top-k) on its
# first GPU run: its cubin (into /tmp/sc, beside the tree's; sass-cert.tgz,
# its ptxas report), then on those cubins TestRouterCertMatchesI8
# (router=i8wg's experts and weights), TestRouterShapesMatchI8,
# TestCertBoundHolds, TestDefaultsHaveCubins, TestMeasureRouterCert
# (router=i8wg against router=cert, 64 to 16384 rows), the oracle under
# router=cert (cert-tests.txt), and prefill of 4K and 16K tokens (two
# repeats) under the defaults and router=cert in two alternating rounds
# (cert-rounds.tgz, packed again after each run). And the variant "codes"
# (gemm.cu's GEMM_RA_CODES_L2=1: the MoE's register-A tiles ask L2 for all
# their weight rows at the block's start): its cubins (/tmp/s-codes),
# TestMoEGroupedMatchesReference and TestMeasureGEMM on them, its prefill
# in the rounds. And convgemm=on (gemm_conv.cu: the Gated DeltaNet conv in
# the in_proj GEMM's epilogue, conv_fix after it): its cubin,
# TestConvGEMMMatchesApart, the oracle, its prefill in the rounds.
# From the repository root; $CARRY (default devrun/ct) made at the
# commit to run as
#   V=$(bash docs/bench/cuda/variant-pack.sh devrun/ct codes GEMM_RA_CODES_L2 | tail -1)
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/ct petal=HEAD petal-codes=$V
#   tar cJf devrun/ct/ref.txz -C ../shared/oracle reference
# and the tree's logs, results, tokenizer test data and PTX but
# route_cert.ptx and gemm_conv.ptx left out of the call. About 5 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/ct}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
T=/tmp/ct
call_setup "$D" "$R" "$O" $T /tmp/sc
new_cubin /tmp/sc route_cert $T
new_cubin /tmp/sc gemm_conv $T
rm -rf /tmp/s1 && cp -r /tmp/sc /tmp/s1 && variant_cubins "$D" codes $T
(cd /tmp && tar czf "$O/sass-cert.tgz" sc/route_cert.* sc/gemm_conv.* sc/manifest.txt ct/ptxas-*.txt ct/codes)
cuda_tests /tmp/sc "$D/cuda.test" 'TestRouterCertMatchesI8|TestRouterCertFallsBack|TestRouterShapesMatchI8|TestCertBoundHolds|TestDefaultsHaveCubins|TestConvGEMMMatchesApart' $T/tests.txt
grep -E 'token|weight|candidates' $T/tests.txt | head -8
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/sc PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 60 "$D/cuda.test" -test.v \
  -test.run '^TestMeasureRouterCert$' > $T/measure.txt 2>&1)
echo "TestMeasureRouterCert: rc=$?"; grep -E 'router ' $T/measure.txt | sed 's/^ *//' | cut -c1-120
PETAL_CUDA_SASS=/tmp/sc oracle_specs "$D" 'defaults|router=cert|convgemm=on' $T/oracle.txt
cuda_tests /tmp/s-codes "$D/cuda-codes.test" 'TestMoEGroupedMatchesReference' $T/tests-codes.txt
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/s-codes PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 60 "$D/cuda-codes.test" -test.v \
  -test.run '^TestMeasureGEMM$' > $T/measure-codes.txt 2>&1)
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/sc PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 60 "$D/cuda.test" -test.v \
  -test.run '^TestMeasureGEMM$' > $T/measure-gemm.txt 2>&1)
echo "TestMeasureGEMM (main, codes): rc=$?"; grep -E 'w160rw' $T/measure-gemm.txt $T/measure-codes.txt | sed 's/^ *//' | cut -c1-150 | head -12
cat $T/tests.txt $T/measure.txt $T/oracle.txt $T/tests-codes.txt $T/measure-gemm.txt $T/measure-codes.txt > "$O/cert-tests.txt"
el tests
rm -rf /tmp/cr && mkdir -p /tmp/cr
config_rounds "$D" /tmp/cr "$O/cert-rounds.tgz" petal:sc:cuda petal:sc:cuda:router=cert petal-codes:s-codes:cuda petal:sc:cuda:convgemm=on
el rounds
