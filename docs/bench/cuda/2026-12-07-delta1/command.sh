#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/tf"]
# (cuda.test and petal of 3019ddc, -tags nofixture, and the oracle's reference;
# devrun/tf/BUILT_FROM), the tree's logs and PTX left out of the call but
# gdn_chunk_tf32.ptx, gdn_chunk_conv.ptx and clock/:
CARRY=devrun/tf bash docs/bench/cuda/run-delta1.sh   # -> env.txt, logs.tgz, sass.tgz
# (sass.tgz's gdn_chunk_tf32 cubin committed as engine/cuda/kernels/sass/gdn_chunk_tf32.sm_90.cubin.gz;
# gdn_chunk_conv's not kept: convdelta=on was removed after this run)
