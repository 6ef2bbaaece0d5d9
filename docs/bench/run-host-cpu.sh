#!/usr/bin/env bash
# Benchmarks of the CPU backend on the GPU machine's host CPU, at the 35B shape.
set -u
cd "$(dirname "$0")"
gunzip -f petal.gz petal-old.gz && chmod +x petal petal-old
echo "== machine"; nproc; grep -m1 "model name" /proc/cpuinfo; free -g | head -2
echo "== petal bench, synthetic qwen3.6-35b-a3b (new)"
timeout 200 ./petal bench --synthetic qwen3.6-35b-a3b --lengths 512,2048 --decode-tokens 8 --repeats 1 --out $OUT/bench-35b.json --chart $OUT/bench-35b.svg 2>&1 | tail -8
echo "== decode before the grouped experts (old binary)"
timeout 90 ./petal-old bench --synthetic qwen3.6-35b-a3b --prompt-lengths 64 --context-lengths 512 --decode-tokens 8 --repeats 1 2>&1 | tail -3
echo "== snapshots, synthetic qwen3.6-35b-a3b, random state"
PETAL_BENCH_SHAPE=qwen3.6-35b-a3b PETAL_BENCH_PREFILL=0 timeout 120 ./session.test -test.run '^$' -test.bench SnapshotShape -test.benchtime 2x 2>&1 | grep -E "Bench|built"
echo "== quantised mat-vec vs memory read, all cores"
timeout 60 ./quant.test -test.run XXX -test.bench 'MatVec4bit|MemRead' -test.benchtime 20x 2>&1 | grep Bench
