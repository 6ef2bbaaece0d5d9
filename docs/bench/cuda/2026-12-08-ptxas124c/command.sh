# not a GPU run: CUDA 12.4's ptxas and cuobjdump (Debian trixie's
# nvidia-cuda-toolkit, extracted as engine/cuda/kernels/regs.sh's header
# says), from the repository root, on the PTX of the commit these logs were committed with, for the
# families written without a GPU (attn_prefill_wgo, route_cert, gemm_conv)
# beside the built-in ones they stand in for, and the variant "codes"
# (GEMM_RA_CODES_L2=1) of gemm_fitw and gemm_downbf
PTXAS=/tmp/ctk12/usr/bin/ptxas CUOBJDUMP=/tmp/ctk12/usr/bin/cuobjdump \
  sh engine/cuda/kernels/regs.sh attn_prefill_wg attn_prefill_wgo route_i8w route_cert gemm_wg gemm_conv gemm_fitw gemm_downbf > docs/bench/cuda/2026-12-08-ptxas124c/regs.txt 2>&1
d=$(mktemp -d) && mkdir -p $d/out && cp -r engine/cuda/kernels/* $d/ &&
  sed -i 's/^#define GEMM_RA_CODES_L2 0$/#define GEMM_RA_CODES_L2 1/' $d/gemm.cu && sh $d/gen.sh $d/out &&
  cp $d/out/gemm_fitw.ptx $d/out/gemm_downbf.ptx $d/ &&
  PTXAS=/tmp/ctk12/usr/bin/ptxas sh $d/regs.sh gemm_fitw gemm_downbf > docs/bench/cuda/2026-12-08-ptxas124c/regs-codes.txt 2>&1
