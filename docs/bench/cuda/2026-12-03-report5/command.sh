#!/bin/bash
# main at aa64773; devrun/ml/petal.gz: CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' -o devrun/ml/petal . ; gzip
# The report (bench/results/2026-12-03-h200-cuda; this folder: progress, steps, nvidia-smi samples):
PETAL=devrun/ml/petal LIMIT=330 ABLATE=graphs=off,pdl=off,norms=apart,kv=bf16 bash docs/bench/cuda/run-report.sh
# Then, in the next call (repeats-1/2.*): the peer's lengths, three runs a length (medians), two rounds.
gunzip -f devrun/ml/petal.gz && chmod +x devrun/ml/petal; P=devrun/ml/petal; O=${OUT:-/tmp/o}; for r in 1 2; do timeout 150 $P bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512,1K,4K,16K --context-lengths 256,4K,16K --decode-tokens 64 --repeats 3 --out $O/repeats-$r.json > $O/repeats-$r.txt 2>&1; tail -8 $O/repeats-$r.txt; done
