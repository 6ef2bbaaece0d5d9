#!/bin/bash
# main at 22efcb4 (petal and cuda.test built at 2d99357: the same code); an H100 (env.txt).
# devrun/report/petals.txz: petal (this build) and petal-old (4f3d75a), devrun/ml/cuda.test.gz, as the script says.
bash docs/bench/cuda/run-report6.sh
# The report's files stayed on the machine (eight files come back); output.txt has what the call printed of them.
# The same report again right after, on the same machine, its folder tarred as one file
# (bench/results/2026-12-06-h100-cuda):
#   PETAL=devrun/report/petal LIMIT=200 ABLATE=linears=apart,attn=flash,graphs=off,kv=bf16 OUT=/tmp/rep bash docs/bench/cuda/run-report.sh
#   tar czf $OUT/report.tgz -C /tmp rep
