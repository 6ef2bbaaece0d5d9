#!/bin/bash
# From the repository root on the GPU machine (an H100, env.txt), carry ["devrun/fw"]: petal and
# cuda.test of 0711290 and the GEMM_RA_LATE_LOAD build of it (98ca699: ptx-late.txz and
# cuda-late.test.xz), made as docs/bench/cuda/README.md "Next" item 0 says, and ref.txz; the
# tree's logs and PTX left out of the call but gdn_chunk_frag.ptx, gemm_fitw.ptx, gemm_ws.ptx and
# phase.ptx:
PART=AL bash docs/bench/cuda/run-fw2.sh 2>&1 | tail -80
#   -> logs-a.tgz (tests.txt, oracle.txt, measure.txt: TestMeasureDeltaForms, measure-gemm.txt,
#      the ptxas logs), late.tgz (the late build's tests, TestMeasureGEMM and ptxas logs),
#      sass.tgz (the call's cubins; not committed into engine/cuda/kernels/sass), env.txt
