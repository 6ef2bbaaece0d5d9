#!/bin/bash
# From the repository root on the GPU machine (an H100, env.txt), carry ["devrun/p3"]: petal and
# cuda.test of 91d2794, the variant oneload (13bc35f: gemm.cu's load and load_late one body, gen.sh
# run, on 91d2794) as petal-oneload, cuda-oneload.test and ptx-oneload.txz, made as run-prof3.sh's
# header says; the tree's PTX left out of the call but phase.ptx and the six gemm families':
bash docs/bench/cuda/run-prof3.sh 2>&1 | tail -70
#   -> logs.tgz (phases.txt: TestMeasurePhases; profile.txt: petal bench --profile at 512 / 4K /
#      16K tokens and decode at 4K; tests-oneload.txt; bench-ROUND-BUILD: the prefill rounds),
#      ptxas.tgz (phase's and oneload's families' ptxas -v), env.txt; sass.tgz (the cubins of
#      phase and oneload) not kept here: oneload's are committed in engine/cuda/kernels/sass (7b85ba1)
