#!/bin/bash
# main at 0b51631 (cuda.test built there; run-split.sh from b8c3e0f), on an H100 (the call's card; its env.txt).
# devrun/ml: cuda.test.gz and ref.txz as run-split.sh says.
NCU=1 bash docs/bench/cuda/run-split.sh
