#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/w2"]
# (cuda.test and petal of 58a13b8, -tags nofixture, and the oracle's reference;
# devrun-pack.sh with TEST=HEAD, then ref.txz), the tree's logs and PTX left out
# of the call but gdn_chunk_walk2.ptx, gdn_chunk_walk2_tf32.ptx and clock/:
CARRY=devrun/w2 bash docs/bench/cuda/run-walk2.sh   # -> env.txt, logs.tgz, sass.tgz
# (sass.tgz not kept: deltawalk=two was removed after this run)
