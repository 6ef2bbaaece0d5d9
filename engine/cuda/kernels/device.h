// device.h: the few CUDA device declarations petal's kernels use.
//
// clang compiles the kernels with -nocudainc (no CUDA toolkit on the build
// machine), so the built-ins come from here; nvcc, used only to compare its
// code with clang's, has its own headers and gets the same names from them.
#pragma once

#if defined(__NVCC__)
#define PETAL_TID_X() threadIdx.x
#define PETAL_BID_X() blockIdx.x
#define PETAL_BID_Y() blockIdx.y
#define PETAL_NTID_X() blockDim.x
#define PETAL_NCTAID_X() gridDim.x
#else
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __forceinline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
// __syncthreads is a clang built-in.
#define PETAL_TID_X() __nvvm_read_ptx_sreg_tid_x()
#define PETAL_BID_X() __nvvm_read_ptx_sreg_ctaid_x()
#define PETAL_BID_Y() __nvvm_read_ptx_sreg_ctaid_y()
#define PETAL_NTID_X() __nvvm_read_ptx_sreg_ntid_x()
#define PETAL_NCTAID_X() __nvvm_read_ptx_sreg_nctaid_x()
static __device__ inline float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
static __device__ inline float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
static __device__ inline unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
static __device__ inline float __shfl_xor_sync(unsigned mask, float v, int lane) {
  return __nvvm_shfl_sync_bfly_f32(mask, v, lane, 0x1f);
}
static __device__ inline void __syncwarp() { __nvvm_bar_warp_sync(0xffffffffu); }
#endif

// pdl_begin opens every kernel (a test checks that each entry point of
// the PTX has it). Launched with programmatic stream serialization (the
// backend's pdl=on, and the kernels pdl=some names), a kernel may start
// while the one before it on the stream is still running:
// griddepcontrol.wait holds it until that one has finished and its writes
// are visible, so nothing is read early. Launched without that attribute
// it is a no-op. The next kernel is let launch at pdl_trigger, or as this
// one's blocks retire: its blocks are then placed as this one's leave, not
// beside them while it runs (where, let launch at the start of the kernel
// before, some kernels ran slower: pdlpre1, pdllate1).
static __device__ __forceinline__ void pdl_begin() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

// pdl_trigger marks the point after which a kernel's block has issued its
// main work: a block that then waits for the others (the last block's tail
// behind a ticket) lets the next kernel launch first.
static __device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// pdl_wait is pdl_begin by the name a kernel whose blocks wait for each
// other (a grid-wide barrier) opens with: it must not call pdl_trigger
// before its last barrier, so that no later kernel's blocks take the room
// its own blocks need to be resident together.
static __device__ __forceinline__ void pdl_wait() { pdl_begin(); }

typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

struct u32x4 {
  u32 x, y, z, w;
};
// float4v is four floats read or written as one 16-byte access.
struct __attribute__((aligned(16))) float4v {
  float x, y, z, w;
};

// ticket_inc returns *p and stores (*p >= limit) ? 0 : *p + 1: the tickets
// of "the last block to finish" (a counter that wraps by itself, so that a
// launch can be replayed in a graph) and the arrivals of a grid barrier.
static __device__ __forceinline__ u32 ticket_inc(u32* p, u32 limit) {
  u32 old;
  asm volatile("atom.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(limit) : "memory");
  return old;
}

// fence_gpu orders this thread's memory accesses before and after it for
// every thread of the GPU (with a barrier, the block's accesses too).
static __device__ __forceinline__ void fence_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// grid_sync returns once every block of the grid has called it, with their
// writes before it visible. bar[0] counts arrivals (atom.inc wraps it back
// to 0 at the last), bar[1] is the generation the last arrival advances;
// both are left ready for the next barrier and the next launch.
static __device__ __forceinline__ void grid_sync(u32* bar, u32 nblocks) {
  __syncthreads();
  if (PETAL_TID_X() == 0) {
    volatile u32* gen = bar + 1;
    const u32 g = *gen;
    fence_gpu();  // the block's writes (and the read of g) before the arrival
    if (ticket_inc(bar, nblocks - 1) == nblocks - 1) {
      asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(bar + 1) : "memory");
    } else {
      while (*gen == g) {
      }
    }
    fence_gpu();
  }
  __syncthreads();
}

// petal_globaltimer is the GPU's nanosecond clock, the same on every
// multiprocessor.
static __device__ __forceinline__ u64 petal_globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// PETAL_MARK(k) records, in a build of a family with PETAL_CLOCK defined
// (kernels/clock/, for measurements; not embedded), the time block b
// reaches point k (< 16) of its kernel in petal_clock[16·b + k], where the
// measurement set petal_clock; elsewhere it is nothing.
#ifdef PETAL_CLOCK
extern "C" {
__device__ u64* petal_clock;
}
#define PETAL_MARK(k)                                                                             \
  do {                                                                                            \
    if (petal_clock && PETAL_TID_X() == 0) petal_clock[(long long)PETAL_BID_X() * 16 + (k)] = petal_globaltimer(); \
  } while (0)
#else
#define PETAL_MARK(k) \
  do {                \
  } while (0)
#endif

// bf16 widens to float32 exactly: its bits are the high half of a float's.
static __device__ __forceinline__ float bf16_to_f32(u16 b) { return __uint_as_float((u32)b << 16); }

// prefetch_l2 asks L2 for the line holding p, and does not wait for it (no
// register is written): a decode kernel names the first weights it will
// read before it stages its input, so that device memory is busy during the
// staging and the loads then find them in L2.
static __device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// ld_stream_16 loads 16 bytes that are read once (weights): through the
// read-only path, not kept in L1.
static __device__ __forceinline__ u32x4 ld_stream_16(const void* p) {
  u32x4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// cp.async: copies from device to shared memory that take no registers and
// are waited for by group (cp_commit closes a thread's group, cp_wait<N>
// waits until at most N of its groups are in flight). smem_u32 is a shared
// pointer's address in the shared window, as cp.async and ldmatrix take it.
static __device__ __forceinline__ u32 smem_u32(const void* p) {
  u32 a;
  asm("{.reg .u64 t;\n\tcvta.to.shared.u64 t, %1;\n\tcvt.u32.u64 %0, t;}" : "=r"(a) : "l"(p));
  return a;
}
// cp_async16 copies 16 bytes (zeros where !valid), bypassing L1.
static __device__ __forceinline__ void cp_async16(u32 dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
// cp_async4 copies 4 bytes (zeros where !valid).
static __device__ __forceinline__ void cp_async4(u32 dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0) : "memory");
}
// cp_async16_if and cp_async4_if are cp_async16 and cp_async4 issued only
// where issue is set, predicated in the instruction rather than branched
// around (a branch between a wgmma and its wait makes ptxas serialise the
// wgmma: C7513).
static __device__ __forceinline__ void cp_async16_if(u32 dst, const void* src, bool issue, bool valid) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n@p cp.async.cg.shared.global [%0], [%1], 16, %2;\n}" ::"r"(dst), "l"(src),
               "r"(valid ? 16 : 0), "r"((int)issue)
               : "memory");
}
static __device__ __forceinline__ void cp_async4_if(u32 dst, const void* src, bool issue, bool valid) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n@p cp.async.ca.shared.global [%0], [%1], 4, %2;\n}" ::"r"(dst), "l"(src),
               "r"(valid ? 4 : 0), "r"((int)issue)
               : "memory");
}
static __device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

// QMVGroup describes up to QMV_GROUP matrices of the same width read
// against one x, for qmv.cu's grouped mat-vecs and gemm.cu's grouped
// GEMMs (a QLinearGroup: the Gated DeltaNet's four input
// projections, attention's q, k and v), so that one launch does them all:
// the rows of matrix m are rows start[m] .. start[m+1]-1 of the launch,
// its codes at words[m], its interleaved scales and biases at sb[m], its
// output at y[m]. It is passed by value, so that it is read from the
// kernel's parameters: in device memory, reading it was the first wait of
// every block, about a microsecond (run pad1). Its fields are read at
// constant indices only, so that it stays there.
#define QMV_GROUP 4
struct QMVGroup {
  const u32* words[QMV_GROUP];
  const u32* sb[QMV_GROUP];
  float* y[QMV_GROUP];
  int start[QMV_GROUP + 1];
  int n;
};
