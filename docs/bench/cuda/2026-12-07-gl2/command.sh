#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/gl2"]
# (cuda.test and petal of 4643d29, -tags nofixture, and the oracle's reference;
# devrun/gl2/BUILT_FROM), the tree's logs and PTX left out of the call but
# gdn_layer.ptx, gdn_layer_nb.ptx, attn_out.ptx and clock/:
bash docs/bench/cuda/run-gl2.sh   # -> env.txt, logs.tgz, sass.tgz (not kept: the forms it made cubins for were removed)
