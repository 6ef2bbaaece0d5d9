#!/bin/bash
# run-gemm.sh: one GPU session for the 4-bit tensor-core GEMMs (gemm.cu):
# ptxas resource report of the embedded PTX, the correctness tests, the
# measurements, and cuBLAS bf16 GEMMs of the same shapes through PyTorch
# as the ceiling. Run as devrun/gemm/run.sh next to cuda.test
# (CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c ./engine/cuda) and gemm.ptx.
set -o pipefail
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}
mkdir -p $O
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv; } > $O/env.txt 2>&1
ptxas -arch=sm_90 -O3 -v -o gemm.cubin gemm.ptx > $O/ptxas.txt 2>&1
grep -E "error|Compiling|Used|spill" $O/ptxas.txt | paste - - - | sed 's/ptxas info    ://g' | cut -c1-220
export PETAL_CUDA_REQUIRE=1
./cuda.test -test.v -test.timeout 240s -test.run 'TestGEMM|TestMoEGrouped|TestMoERoute' 2>&1 > $O/test.txt
grep -E '^(--- |ok|FAIL|PASS)|rror|panic|worst|T=' $O/test.txt | cut -c1-260
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,utilization.gpu --format=csv -lms 250 > $O/clocks.txt 2>&1 &
SMI=$!
PETAL_CUDA_BENCH=1 ./cuda.test -test.v -test.timeout 200s -test.run 'TestMeasureGEMM' 2>&1 > $O/measure.txt
grep -vE '^=== RUN' $O/measure.txt | cut -c1-400
PYTHONUNBUFFERED=1 python3 - > $O/cublas.txt 2>&1 <<'PY'
import torch
def bench(M, N, K, reps=30):
    a = torch.randn(M, K, device='cuda', dtype=torch.bfloat16)
    b = torch.randn(N, K, device='cuda', dtype=torch.bfloat16)
    for _ in range(3): a @ b.t()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b.t(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    ts.sort(); t = ts[len(ts)//2] / 1e3
    print(f"cublas bf16 M={M} N={N} K={K}: {t*1e6:.1f} us, {2*M*N*K/t/1e12:.0f} TFLOP/s", flush=True)
print(torch.__version__, torch.cuda.get_device_name())
bench(8192, 8192, 8192)
for M in (512, 4096):
    for N, K in ((8192, 2048), (4096, 2048), (2048, 4096), (512, 2048), (4160, 2048), (2048, 2048)):
        bench(M, N, K)
for T in (512, 4096):
    bench(T*8, 1024, 2048)  # all routed rows through one gate+up matrix: the no-grouping ceiling
    bench(T*8, 2048, 512)
PY
cat $O/cublas.txt
kill $SMI
