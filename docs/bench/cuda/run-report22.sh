#!/bin/bash
# run-report22.sh: the report on today's defaults (since the fourteenth:
# normbf=moe, normf32=lean, the MoE's bf16 outputs and the dense GEMMs'
# float32 outputs through shared memory, router=i8wg, qkrows=warp, the
# delta rule's prep with GC_PREP_VEC) in one short call, every run on the
# tree's cubins (none compiled by the driver): TestDefaultsHaveCubins,
# conformance under the defaults, TestQKRowsMatchPrep,
# TestChunkedDeltaFlowMatchesFrag and TestCombineNormMatchesApart
# (tests.txt), the oracle under the defaults, qkrows=block, deltaflow=on
# and combinenorm=on (oracle.txt); then run-report.sh with qkrows=block,
# deltaflow=on, combinenorm=on, router=i8 and moefit=on among its
# ablations (report.tgz).
# From the repository root; $CARRY (default devrun/r22): cuda.test.xz and
# petals.txz (petal) of main (TEST=HEAD devrun-pack.sh devrun/r22
# petal=HEAD), the oracle's ref.txz (tar cJf devrun/r22/ref.txz -C
# ../shared/oracle reference); the tree's logs, results, tokenizer test
# data and PTX left out of the call. About 5 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/r22}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env-tests.txt"
export PETAL_CUDA_SASS=$R/engine/cuda/kernels/sass
cuda_tests $PETAL_CUDA_SASS $D/cuda.test \
  'TestDefaultsHaveCubins|TestConformance/default$|TestQKRowsMatchPrep|TestChunkedDeltaFlowMatchesFrag|TestCombineNormMatchesApart|TestNormCombKernelMatchesLauncher' $O/tests.txt
oracle_specs $D 'defaults|qkrows=block|deltaflow=on|combinenorm=on' $O/oracle.txt
echo "tests: $(( $(date +%s) - start )) s"
PETAL=$D/petal LIMIT=${LIMIT:-220} ABLATE=${ABLATE-qkrows=block,deltaflow=on,combinenorm=on,router=i8,moefit=on} ABLATE_REPEATS=${ABLATE_REPEATS:-2} OUT=/tmp/rep \
  bash docs/bench/cuda/run-report.sh | tail -40
tar czf $O/report.tgz -C /tmp rep
echo "all: $(( $(date +%s) - start )) s"
