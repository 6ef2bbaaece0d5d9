#!/bin/bash
# From the repository root on the GPU machine (an H100 came), carry ["devrun/n9"]
# (petals.txz: petal of 9d57c8a and petal-old of dfa76fa; cuda.test.xz of 9d57c8a; -tags nofixture):
mkdir -p devrun/vd && cp devrun/n9/cuda.test.xz devrun/vd/ && (cd devrun/n9 && tar xJf petals.txz) &&
  cp devrun/n9/petal devrun/vd/petal && TESTS=Test LIMIT=520 bash docs/bench/cuda/run-verify14.sh   # -> verify.tgz
