#!/bin/bash
# from the repository root on the GPU machine (an H100), carry ["devrun/gl"]
# (devrun/gl built from ce92eeb as run-gl1.sh says; the tree's logs and PTX
# but route_cl.ptx, moe_route.ptx, gdn_layer.ptx, attn_out.ptx and clock/
# left out of the call, as its header says)
bash docs/bench/cuda/run-gl1.sh
