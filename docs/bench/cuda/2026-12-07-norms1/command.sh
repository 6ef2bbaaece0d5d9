#!/bin/bash
# From the repository root on the machine run-report21.sh left warm (the same H100, its
# devrun/r21 unpacked: petal of 4b98411), the tree trimmed as for that call:
bash docs/bench/cuda/run-norms1.sh 2>&1 | tail -60
#   -> norms1.tgz: bench-ROUND-BACKEND.{txt,json}, three alternating rounds of the defaults,
#      normf32=lean and normf32=lean,normbf=moe (prefill of 512 / 4K / 16K tokens, three runs a
#      length; decode at 256)
