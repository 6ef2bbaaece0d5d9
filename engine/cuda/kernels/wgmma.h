// wgmma.h: Hopper's warpgroup matrix multiply (wgmma, sm_90a) as gemm_wg.cu
// and attn_prefill_wg.cu use it: shared-memory descriptors, the fences and
// waits, and the mma_async forms with their accumulator operand lists.
#pragma once
#include "device.h"

// ---- wgmma (sm_90a; gemm_wg.cu instantiates gemm_tile with WG = 2 or 3; attn_prefill_wg.cu) ----
//
// A warpgroup (four of the block's warps; a block has one or two) multiplies a 64 x 128 tile of X by the
// 128 x 16 slice of the W tile in one wgmma.mma_async, both operands read
// from shared memory through descriptors. gemm_tile's tiles are already
// the canonical K-major layout with the 128-byte swizzle: rows of 128
// bytes (64 bf16 of k), chunk c of row r at c ^ (r & 7), from a base
// 1024-byte aligned; 8-row groups 1024 bytes apart (the stride byte
// offset); a k-step of 16 further along a row is 32 bytes more on the
// start address.
static __device__ __forceinline__ unsigned long long wg_desc(u32 addr) {
  return (unsigned long long)((addr >> 4) & 0x3FFF) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
static __device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
static __device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
static __device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// fence_proxy_async orders this thread's writes to shared memory (st.shared,
// cp.async) before the async proxy's reads (wgmma's operands).
static __device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// wg_keep pins the accumulators in their registers at this point (wgmma
// writes them asynchronously: no copy may be scheduled across the wait).
template <int N = 64>
static __device__ __forceinline__ void wg_keep(float* d) {
#pragma unroll
  for (int i = 0; i < N; i++) asm volatile("" : "+f"(d[i])::"memory");
}
// The accumulator operands of a wgmma (d[0 ..], as "+f" outputs %0 ..) and
// their register lists in the instruction's text, 32, 64 or 128 of them.
#define WG_D8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WG_D32(i) WG_D8(i), WG_D8(i + 8), WG_D8(i + 16), WG_D8(i + 24)
#define WG_D64 WG_D32(0), WG_D32(32)
#define WG_D128 WG_D64, WG_D32(64), WG_D32(96)
#define WG_R0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_R1 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_R2 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WG_R3 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WG_R8 "{%0, %1, %2, %3, %4, %5, %6, %7}"
#define WG_R16 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define WG_D16(i) WG_D8(i), WG_D8(i + 8)
#define WG_R32 "{" WG_R0 "}"
#define WG_R64 "{" WG_R0 ", " WG_R1 "}"
#define WG_R128 "{" WG_R0 ", " WG_R1 ", " WG_R2 ", " WG_R3 "}"

// wg_mma_n128 adds A[64 x 16] · B[128 x 16]^T to d (64 floats a thread: n8
// tile j's four at d[4j..4j+3], rows 16·warp + g (+8 for the last two),
// columns 8j + 2c, +1), A and B given by their descriptors.
static __device__ __forceinline__ void wg_mma_n128(float* d, unsigned long long a, unsigned long long b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %[one], 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " WG_R64 ", %[a], %[b], p, 1, 1, 0, 0;\n}"
      : WG_D64
      : [a] "l"(a), [b] "l"(b), [one] "r"(1)
      : "memory");
}

// wg_mma_n<N>_ra adds A[64 x 16] · B[N x 16]^T to d (N/2 floats a thread,
// laid out as wg_mma_n128's) with A from registers: this warp's rows
// 16·(warp % 4) + g (a[0]: k 2c, 2c+1; a[2]: k 2c+8, 2c+9) and g+8 (a[1],
// a[3]), each a bf16 pair, as mma.sync's A fragment; B through its
// descriptor.
#define WG_MMA_RA(N, REGS, ACC)                                                                                        \
  static __device__ __forceinline__ void wg_mma_n##N##_ra(float* d, const u32* a, unsigned long long b) {             \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %[one], 0;\n"                                                      \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 " REGS                                   \
                 ", {%[a0], %[a1], %[a2], %[a3]}, %[b], p, 1, 1, 0;\n}"                                              \
                 : ACC                                                                                                \
                 : [a0] "r"(a[0]), [a1] "r"(a[1]), [a2] "r"(a[2]), [a3] "r"(a[3]), [b] "l"(b), [one] "r"(1)             \
                 : "memory");                                                                                         \
  }
WG_MMA_RA(16, WG_R8, WG_D8(0))
WG_MMA_RA(32, WG_R16, WG_D16(0))
WG_MMA_RA(64, WG_R32, WG_D32(0))
WG_MMA_RA(128, WG_R64, WG_D64)
WG_MMA_RA(256, WG_R128, WG_D128)
// n = 80 and 160: tiles sized to an expert's rows at 2K and 4K tokens
// (moefit: 64 and 128 on average, a few over)
#define WG_R40 "{" WG_R0 ", %32, %33, %34, %35, %36, %37, %38, %39}"
#define WG_R80 "{" WG_R0 ", " WG_R1 ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}"
#define WG_D40 WG_D32(0), WG_D8(32)
#define WG_D80 WG_D64, WG_D16(64)
WG_MMA_RA(80, WG_R40, WG_D40)
WG_MMA_RA(160, WG_R80, WG_D80)
// n = 96, 112 and 144: gemm_fitw.cu's tiles of an expert's last rows,
// between 64 and 160 in steps of 16
#define WG_R48 "{" WG_R0 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47}"
#define WG_R56 "{" WG_R0 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55}"
#define WG_R72 "{" WG_R0 ", " WG_R1 ", %64, %65, %66, %67, %68, %69, %70, %71}"
#define WG_D48 WG_D32(0), WG_D16(32)
#define WG_D56 WG_D32(0), WG_D16(32), WG_D8(48)
#define WG_D72 WG_D64, WG_D8(64)
WG_MMA_RA(96, WG_R48, WG_D48)
WG_MMA_RA(112, WG_R56, WG_D56)
WG_MMA_RA(144, WG_R72, WG_D72)
static __device__ __forceinline__ void wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
// wg_keep4 keeps an A fragment's registers as they are up to this point
// (wgmma reads them asynchronously, until its wait).
static __device__ __forceinline__ void wg_keep4(u32* a) {
#pragma unroll
  for (int i = 0; i < 4; i++) asm volatile("" : "+r"(a[i])::"memory");
}
