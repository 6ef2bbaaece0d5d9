#!/bin/bash
# run-report22.sh: the report on today's defaults (since the fourteenth:
# normbf=moe, normf32=lean, the MoE's bf16 outputs and the dense GEMMs'
# float32 outputs through shared memory, router=i8wg, qkrows=warp) in one
# short call: first the cubins of norm_comb (combinenorm=on) and
# gdn_chunk_conv (convprep=on), neither yet run on a GPU (sass.tgz), every
# run after on them and the tree's; then TestDefaultsHaveCubins,
# conformance under the defaults, TestQKRowsMatchPrep,
# TestChunkedDeltaFlowMatchesFrag, TestCombineNormMatchesApart and
# TestConvPrepMatchesApart (tests.txt), the oracle under the defaults,
# qkrows=block, deltaflow=on, combinenorm=on and convprep=on (oracle.txt);
# then run-report.sh with qkrows=block, deltaflow=on, combinenorm=on,
# convprep=on, router=i8 and moefit=on among its ablations (report.tgz).
# From the repository root; $CARRY (default devrun/r22): cuda.test.xz and
# petals.txz (petal) of main (TEST=HEAD devrun-pack.sh devrun/r22
# petal=HEAD), the oracle's ref.txz (tar cJf devrun/r22/ref.txz -C
# ../shared/oracle reference); the tree's logs, results, tokenizer test
# data and PTX but norm_comb.ptx and gdn_chunk_conv.ptx left out of the
# call. About 5 minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/r22}; mkdir -p "$O"
. docs/bench/cuda/lib.sh
start=$(date +%s)
unpack_oracle "$D" "$R" && (cd "$D" && tar xJf petals.txz)
gpu_env "$O/env-tests.txt"
rm -rf /tmp/s22 && cp -r engine/cuda/kernels/sass /tmp/s22
new_cubin /tmp/s22 norm_comb /tmp/s22
new_cubin /tmp/s22 gdn_chunk_conv /tmp/s22
(cd /tmp && tar czf $O/sass.tgz s22/norm_comb.* s22/gdn_chunk_conv.* s22/manifest.txt s22/ptxas-*.txt)
# every run below on the tree's cubins and those two, none compiled by the driver
export PETAL_CUDA_SASS=/tmp/s22
cuda_tests /tmp/s22 $D/cuda.test \
  'TestDefaultsHaveCubins|TestConformance/default$|TestQKRowsMatchPrep|TestChunkedDeltaFlowMatchesFrag|TestCombineNormMatchesApart|TestNormCombKernelMatchesLauncher|TestConvPrepMatchesApart' $O/tests.txt
oracle_specs $D 'defaults|qkrows=block|deltaflow=on|combinenorm=on|convprep=on' $O/oracle.txt
echo "tests: $(( $(date +%s) - start )) s"
PETAL=$D/petal LIMIT=${LIMIT:-220} ABLATE=${ABLATE-qkrows=block,deltaflow=on,combinenorm=on,convprep=on,router=i8,moefit=on} ABLATE_REPEATS=${ABLATE_REPEATS:-2} OUT=/tmp/rep \
  bash docs/bench/cuda/run-report.sh | tail -40
tar czf $O/report.tgz -C /tmp rep
echo "all: $(( $(date +%s) - start )) s"
