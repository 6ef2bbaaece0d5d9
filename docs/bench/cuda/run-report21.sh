#!/bin/bash
# run-report21.sh: the report on today's defaults in one short call (the
# late copies, delta=tf32frag, moefit=width and gemm.cu's copies in one
# body since the thirteenth), with normbf=moe, normf32=lean and
# attnprep=on, written and not yet run, measured among its ablations:
# first TestDefaultsHaveCubins, conformance under the defaults,
# TestNormBF16MatchesApart, TestNormBF16MoEMatchesApart,
# TestNormF32LeanMatchesFull and TestAttnPrepMatchesApart (tests.txt), the
# oracle under the defaults, moefit=on, normbf=moe, normf32=lean and
# attnprep=on (oracle.txt); then
# run-report.sh (report.tgz). No peer repeats and no long-context decode
# runs (run-report18.sh's): the report's own rows stand for them. From the
# repository root; $CARRY (default devrun/r21): cuda.test.xz and petals.txz
# (petal) of main, the oracle's ref.txz. About 3 minutes. First the
# cubins of norm_bfo and attn_prep (the two families without one) made by
# the toolkit's ptxas, brought back as sass.tgz, for whichever of them
# becomes a default.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/r21}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env-tests.txt"
rm -rf /tmp/s21 && cp -r engine/cuda/kernels/sass /tmp/s21
for fam in norm_bfo attn_prep; do new_cubin /tmp/s21 $fam /tmp/s21; done
(cd /tmp && tar czf $O/sass.tgz s21/norm_bfo.* s21/attn_prep.* s21/manifest.txt s21/ptxas-*.txt)
cuda_tests '' $D/cuda.test \
  'TestDefaultsHaveCubins|TestConformance/default$|TestNormBF16MatchesApart|TestNormBF16MoEMatchesApart|TestNormF32LeanMatchesFull|TestAttnPrepMatchesApart' $O/tests.txt
oracle_specs $D 'defaults|moefit=on|normbf=moe|normf32=lean|attnprep=on' $O/oracle.txt
echo "tests: $(( $(date +%s) - start )) s"
PETAL=$D/petal LIMIT=${LIMIT:-220} ABLATE=${ABLATE-moefit=on,delta=tf32,normbf=moe,normf32=lean,attnprep=on} ABLATE_REPEATS=${ABLATE_REPEATS:-2} OUT=/tmp/rep \
  bash docs/bench/cuda/run-report.sh | tail -40
tar czf $O/report.tgz -C /tmp rep
echo "all: $(( $(date +%s) - start )) s"
