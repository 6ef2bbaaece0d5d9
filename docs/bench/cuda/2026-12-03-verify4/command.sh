#!/bin/bash
# main at aa64773 (kernels as at bb9a587); devrun/ml: cuda.test.gz and ref.txz as run-verify3.sh says.
bash docs/bench/cuda/run-verify3.sh
