#!/bin/bash
# run-report15.sh: the eighth report (report14; bench/results/2026-12-06-h100-cuda-8):
# run-report16.sh with the build of 064f399 (kvshadow then off by default)
# and petal-old of dfa76fa in devrun/report5, kvshadow=on among the
# ablations and the 32K / 128K decode runs. From the repository root.
CARRY=${CARRY:-devrun/report5} ABLATE=${ABLATE-kv=bf16,kvshadow=on,router=f64,moefit=off} \
  KV_BACKENDS=${KV_BACKENDS:-cuda cuda:kv=bf16 cuda:kvshadow=on} exec bash docs/bench/cuda/run-report16.sh
