#!/bin/bash
# run-tensor.sh: gemm=tensor's GPU tests through the CUDA dialect, where
# gemm_tensor.metal's matmul2d is emulated (a float loop over K per element
# of the cooperative tensor): the dense and grouped GEMM entries against
# float64 (engine/metal/cudarun), and the backend with gemm=tensor
# (engine/metal: its ops against the CPU backend, the conformance suite,
# the oracle model). Nothing here runs on Apple hardware.
#
# From the repository root, with RUN_DIR (default devrun/mtensor) holding
#   cudarun.test.gz  CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c -ldflags='-s -w' ./engine/metal/cudarun
#   metal.test.gz    the same of ./engine/metal
#   ref.txz          tar cJf ref.txz -C ../shared/oracle reference
# (both test binaries embed the kernels: cudarun its PTX, engine/metal the
# .metal sources its unit checks read). Logs to $OUT: env.txt, cudarun.txt,
# metal.txt, summary.txt.
R=$(pwd); D=${RUN_DIR:-$R/devrun/mtensor}; O=${OUT:-/tmp/out}; mkdir -p "$O"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1; } > "$O/env.txt"
cd "$D" || exit 1
for b in cudarun metal; do
	[ -f $b.test.gz ] && gunzip -f $b.test.gz
	chmod +x $b.test
done
mkdir -p oracle && tar xJf ref.txz -C oracle
export PETAL_CUDA_REQUIRE=1 PETAL_TEST_ORACLE=$D/oracle
run() { # log package-dir test-binary pattern
	local s=$(date +%s)
	echo "==== $4" >> "$O/$1"
	(cd "$R/$2" && timeout 100 "$D/$3" -test.v -test.run "$4") >> "$O/$1" 2>&1
	echo "$3 -test.run '$4': rc=$? $(( $(date +%s) - s )) s" | tee -a "$O/$1" >> "$O/summary.txt"
}
run cudarun.txt engine/metal/cudarun cudarun.test '^(TestGEMMTensorDenseMatchesReference|TestGEMMTensorExpertsMatchReference)$'
run metal.txt engine/metal metal.test '^TestTensorGEMMOpsMatchReferences$'
run metal.txt engine/metal metal.test '^TestConformance$/^gemm=tensor$'
run metal.txt engine/metal metal.test '^TestOracle$/^kv=f32,gemm=tensor$'
grep -hE '^(--- FAIL|    --- FAIL|panic)|of the RMS' "$O/cudarun.txt" "$O/metal.txt" | head -40 >> "$O/summary.txt"
cat "$O/summary.txt"
