#!/bin/bash
# run-phases1.sh: TestMeasurePhases (phase.cu; written, not yet run): what a
# boundary between a decode step's dependent phases costs, as a kernel a
# phase replayed in a graph (plain, pdl, pdl with the rows asked of L2
# before the wait) and as grid-wide barriers in one persistent launch
# (fenced, acquire/release, acquire/release with the next rows asked of L2
# first), 64 phases of a 4 MB mat-vec-shaped pass, a matrix each; the
# variants checked bit for bit first. From
# the repository root; devrun/vd holds cuda.test.xz. Log in $OUT/phases.txt.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/devrun/vd; mkdir -p "$O"
. docs/bench/cuda/lib.sh
unpack_devrun "$D"
gpu_env "$O/env.txt"
cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 PETAL_CUDA_BENCH=1 timeout 120 $D/cuda.test -test.v -test.run 'TestMeasurePhases' > $O/phases.txt 2>&1
echo "phases: rc=$?"; grep -E 'µs a phase|phases,|FAIL|PASS|panic' $O/phases.txt | head -12
