#!/bin/bash
# From the repository root on the same warm H100 right after oracleks1, carry
# ["devrun/report5"] (petals.txz: petal of 064f399, whose code is 5724255's,
# and petal-old of dfa76fa, both -tags nofixture; devrun/report5/BUILT_FROM).
bash docs/bench/cuda/run-report15.sh
