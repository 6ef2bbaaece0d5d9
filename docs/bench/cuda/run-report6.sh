#!/bin/bash
# run-report6.sh: the benchmark report (run-report.sh, into $OUT/report),
# the peer's lengths with three runs a length (repeats-petal, and
# repeats-petal-old for the baseline), prompts of 16,
# 64 and 256 tokens under splitk=on and off, then moe=stream's kernels
# checked and timed (TestMoEGroupedMatchesReference, TestMeasureGEMM). From
# the repository root; devrun/report/petals.txz holding petal (this build:
# CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' .) and
# petal-old (the same of 4f3d75a, the build of the 2026-12-03 report: the
# baseline, its repeats beside this build's), and devrun/ml/cuda.test.gz
# (go test -c of ./engine/cuda, the same way).
R=$(pwd); O=${OUT:-/tmp/out}; P=$R/devrun/report/petal
(cd $R/devrun/report && tar xJf petals.txz)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
PETAL=$P LIMIT=200 ABLATE=linears=apart,attn=flash,graphs=off,kv=bf16 OUT=$O/report bash docs/bench/cuda/run-report.sh | tail -32
for b in petal petal-old; do
	timeout 100 $R/devrun/report/$b bench --backend cuda --synthetic qwen3.6-35b-a3b --max-context 20000 --prompt-lengths 512,1K,4K,16K \
		--context-lengths 256,4K,16K --decode-tokens 64 --repeats 3 --out $O/repeats-$b.json > $O/repeats-$b.txt 2>&1
	echo "$b"; tail -8 $O/repeats-$b.txt
done
for b in cuda cuda:splitk=off; do
	f=short-$(echo "$b" | tr ':=' '_.')
	timeout 45 $P bench --backend $b --synthetic qwen3.6-35b-a3b --max-context 4096 --prompt-lengths 16,64,256 \
		--context-lengths 256 --decode-tokens 8 --repeats 3 --out $O/$f.json > $O/$f.txt 2>&1
	echo "$b"; tail -4 $O/$f.txt
done
D=$R/devrun/ml; gunzip -f $D/cuda.test.gz && chmod +x $D/cuda.test && cd $R/engine/cuda
PETAL_CUDA_REQUIRE=1 timeout 90 $D/cuda.test -test.v -test.run 'TestMoEGroupedMatchesReference' > $O/tests.txt 2>&1; grep -E '^(--- |ok|FAIL|PASS)' $O/tests.txt
PETAL_CUDA_BENCH=1 timeout 60 $D/cuda.test -test.v -test.run 'TestMeasureGEMM' > $O/measure.txt 2>&1; grep -E 'moe T=(512|1024) ' $O/measure.txt | cut -c1-200
