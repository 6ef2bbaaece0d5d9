#!/bin/bash
# run-flowtrace1.sh: whether deltaflow=on's prep and state pass run at the
# same time. run-ktrace.sh (every kernel's start and end on the GPU, CUPTI's
# concurrent-kernel records) over a prefill of 4K tokens under the
# defaults and under deltaflow=on (ktrace-def.csv.gz, ktrace-flow.csv.gz):
# the default's gdn_chunk_prep_frag and gdn_chunk_state_frag times, and
# under deltaflow=on whether gdn_chunk_state_flow starts before
# gdn_chunk_prep_flow ends. From the repository root; $CARRY (default
# devrun/qk): petals.txz (petal) of a main that has deltaflow. About 1.5
# minutes.
R=$(pwd); O=${OUT:-/tmp/out}; D=$R/${CARRY:-devrun/qk}; mkdir -p "$O"
(cd "$D" && tar xJf petals.txz)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; } > "$O/env.txt" 2>&1
for run in def:cuda flow:cuda:deltaflow=on; do
	OUT=$O PETAL=$D/petal TAG=${run%%:*} BACKEND=${run#*:} KT_PROMPTS=4K KT_CONTEXTS=256 LIMIT=100 \
		bash docs/bench/cuda/run-ktrace.sh 2>&1 | tail -4
done
