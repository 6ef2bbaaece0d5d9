#!/bin/bash
# run-ktrace.sh: where the time of a CUDA graph replay goes, kernel by
# kernel. Builds ktrace/ktrace.c (a CUPTI injection library) against the
# machine's CUDA toolkit and runs petal bench under it (prefill of 512 and 4K
# tokens, decode at a 4K context; EXTRA adds bench flags such as a --backend
# spec), so that every kernel of every graph replay is timed on the GPU.
# From the repository root, with devrun/rbb/petal.xz (CGO_ENABLED=0
# GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' -o devrun/rbb/petal .;
# xz). Output in $OUT: bench.txt (the bench's table under the tracer),
# ktrace.csv.gz (start,end,stream,node,blocks,threads,corr,name; ns).
R=$(pwd); O=${OUT:-/tmp/out}; mkdir -p "$O"
P=${PETAL:-$R/devrun/rbb/petal}; [ -x "$P" ] || { xz -d -f "$P.xz" && chmod +x "$P"; }
C=/usr/local/cuda/targets/x86_64-linux
KT=$(grep -oE '\} CUpti_ActivityKernel[0-9]+;' $C/include/cupti_activity.h | grep -oE 'CUpti_ActivityKernel[0-9]+' | sort -V | tail -1)
echo "kernel record: $KT"
gcc -O2 -shared -fPIC -DKT=$KT -I$C/include -o /tmp/ktrace.so docs/bench/cuda/ktrace/ktrace.c -L$C/lib -lcupti -Wl,-rpath,$C/lib || exit 1
tag=${TAG:-default}
CUDA_INJECTION64_PATH=/tmp/ktrace.so KTRACE_OUT=/tmp/kt-$tag.csv timeout ${LIMIT:-200} "$P" bench \
	--synthetic qwen3.6-35b-a3b --max-context 8192 --floors=false \
	--prompt-lengths ${KT_PROMPTS:-512,4K} --context-lengths ${KT_CONTEXTS:-4K} --decode-tokens 16 \
	--backend ${BACKEND:-cuda} > "$O/bench-$tag.txt" 2>&1
echo "bench rc=$?"; grep -vE '^\s*$' "$O/bench-$tag.txt" | tail -12
sleep 0.2; wc -l /tmp/kt-$tag.csv; head -3 /tmp/kt-$tag.csv
gzip -c /tmp/kt-$tag.csv > "$O/ktrace-$tag.csv.gz"
