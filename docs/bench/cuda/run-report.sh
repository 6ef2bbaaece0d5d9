#!/bin/bash
# run-report.sh: the benchmark report of issue 10 in one GPU session: petal
# bench --backend cuda --synthetic qwen3.6-35b-a3b over the ten lengths
# 256 .. 128K, with the ceilings measured in the same run (read_xor, the
# tensor-core GEMM), share of floor, kernels per decoded token, peak device
# memory, load time, the ablation table and the chart. It builds nothing:
# run it from the repository root next to devrun/report/petal (built on
# the development machine: CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build
# -ldflags='-s -w' -o devrun/report/petal .). Everything goes to $OUT:
#   env.txt     the machine (nvidia-smi, CPUs, memory) and the commands
#   bench.txt   the table: ceilings, tok/s and % floor per length, kernels
#               per token, load time, peak memory, the ablation tables
#   bench.json  the same report as JSON (ceilings, floors, ablation)
#   speed.svg   tokens per second against length
#   progress.txt  bench's progress lines (one per measurement)
#   smi.txt     device memory and clocks sampled every 500 ms
#   steps.txt   exit status, time and peak device memory (nvidia-smi) of
#               the run
# The lengths can be changed from the environment (defaults: what fits in
# about 9 minutes at the speeds of 2026-12-01; docs/bench/cuda/README.md,
# "Next run"):
#   PROMPT_LENGTHS   prefill lengths   (default 256,512,1K,2K,4K,8K,16K,32K,64K,128K)
#   CONTEXT_LENGTHS  decode contexts   (default 256,512,1K,2K,4K,8K,16K,32K,64K,128K)
#   ABLATE           the switches      (default graphs=off,fused=off,attn=plain,delta=sequential,
#                    gemm=plain,qmv=fast,kv=bf16,pdl=on;
#                    ABLATE= runs none)
#   ABLATE_LENGTHS   their lengths     (default 512,4K,16K: the peer's)
#   ABLATE_REPEATS   runs a measurement of each, against the base swept
#                    again as often (default: one, against the main sweep)
#   LIMIT            seconds for the bench before it is stopped (default 560)
#   BACKEND, SYNTHETIC  (default cuda, qwen3.6-35b-a3b; BACKEND=cpu
#                    SYNTHETIC=tiny with short lengths tries the script
#                    on a machine without a GPU)
set -o pipefail
R=$(pwd)
O=${OUT:-/tmp/out}
P=${PETAL:-$R/devrun/report/petal}
mkdir -p "$O"
if [ ! -x "$P" ]; then
	[ -f "$P.gz" ] && gunzip -f "$P.gz" && chmod +x "$P"
fi
if [ ! -x "$P" ]; then
	echo "run-report.sh: no petal binary at $P (build it on the development machine, see the top of this script)" | tee "$O/steps.txt" >&2
	exit 1
fi
PROMPT_LENGTHS=${PROMPT_LENGTHS:-256,512,1K,2K,4K,8K,16K,32K,64K,128K}
CONTEXT_LENGTHS=${CONTEXT_LENGTHS:-256,512,1K,2K,4K,8K,16K,32K,64K,128K}
ABLATE=${ABLATE-graphs=off,fused=off,attn=plain,delta=sequential,gemm=plain,qmv=fast,kv=bf16,pdl=on}
ABLATE_LENGTHS=${ABLATE_LENGTHS:-512,4K,16K}
LIMIT=${LIMIT:-560}
BACKEND=${BACKEND:-cuda}
SYNTHETIC=${SYNTHETIC:-qwen3.6-35b-a3b}
CMD=("$P" bench --backend "$BACKEND" --synthetic "$SYNTHETIC"
	--prompt-lengths "$PROMPT_LENGTHS" --context-lengths "$CONTEXT_LENGTHS" --decode-tokens ${DECODE_TOKENS:-64}
	--out "$O/bench.json" --chart "$O/speed.svg")
if [ -n "$ABLATE" ]; then
	CMD+=(--ablate "$ABLATE" --ablate-lengths "$ABLATE_LENGTHS")
	[ -n "${ABLATE_REPEATS:-}" ] && CMD+=(--ablate-repeats "$ABLATE_REPEATS")
fi
{
	date -u
	nvidia-smi
	nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
	nproc
	free -g
	"$P" --version
	echo "command: ${CMD[*]}"
} > "$O/env.txt" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,memory.used,power.draw,utilization.gpu --format=csv,noheader,nounits -lms 500 > "$O/smi.txt" 2>&1 &
SMI=$!
start=$(date +%s%N)
# SIGINT first: bench then writes the lengths measured so far
timeout -s INT -k 20 "$LIMIT" "${CMD[@]}" > "$O/bench.txt" 2> "$O/progress.txt"
rc=$?
kill $SMI 2>/dev/null
peak=$(awk -F', ' 'NF >= 3 && $3 + 0 > m { m = $3 + 0 } END { print m + 0 }' "$O/smi.txt")
printf 'bench rc=%s %d ms, peak %s MiB (nvidia-smi)\n' "$rc" $((($(date +%s%N) - start) / 1000000)) "$peak" | tee "$O/steps.txt"
cat "$O/bench.txt"
exit $rc
