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
# (cert-rounds.tgz, packed again after each run).
# From the repository root; $CARRY (default devrun/pf) made at the
# commit to run as
#   TEST=HEAD bash docs/bench/cuda/devrun-pack.sh devrun/pf petal=HEAD
#   tar cJf devrun/pf/ref.txz -C ../shared/oracle reference
# and the tree's logs, results, tokenizer test data and PTX but
# route_cert.ptx left out of the call. About 3 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/pf}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
el() { echo "[$(($(date +%s) - start)) s] $*"; }
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env.txt"
T=/tmp/ct && rm -rf $T && mkdir -p $T
rm -rf /tmp/sc && cp -r engine/cuda/kernels/sass /tmp/sc
new_cubin /tmp/sc route_cert $T
(cd /tmp && tar czf "$O/sass-cert.tgz" sc/route_cert.* sc/manifest.txt ct/ptxas-*.txt)
cuda_tests /tmp/sc "$D/cuda.test" 'TestRouterCertMatchesI8|TestRouterShapesMatchI8|TestCertBoundHolds|TestDefaultsHaveCubins' $T/tests.txt
grep -E 'token|weight|candidates' $T/tests.txt | head -8
(cd engine/cuda && PETAL_CUDA_SASS=/tmp/sc PETAL_CUDA_BENCH=1 PETAL_CUDA_REQUIRE=1 timeout 60 "$D/cuda.test" -test.v \
  -test.run '^TestMeasureRouterCert$' > $T/measure.txt 2>&1)
echo "TestMeasureRouterCert: rc=$?"; grep -E 'router ' $T/measure.txt | sed 's/^ *//' | cut -c1-120
PETAL_CUDA_SASS=/tmp/sc oracle_specs "$D" 'defaults|router=cert' $T/oracle.txt
cat $T/tests.txt $T/measure.txt $T/oracle.txt > "$O/cert-tests.txt"
el tests
rm -rf /tmp/cr && mkdir -p /tmp/cr
config_rounds "$D" /tmp/cr "$O/cert-rounds.tgz" petal:sc:cuda petal:sc:cuda:router=cert
el rounds
