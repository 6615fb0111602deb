// The SM clock a kernel runs at, by its instruction mix: clock64() cycles over %globaltimer
// nanoseconds in thread 0 of block 0, while every SM runs 4 blocks of 256 threads for about
// 40 ms. nvidia-smi reports the application clock (1980 MHz on an H200) whatever the mix;
// this reads the clock the SMs keep.
//
//   nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o sm_clock benches/probes/sm_clock.cu
//   ./sm_clock
//
// Why it is here: pc_sinkstep_tn (cuda/pointcloud.cu) forms its exponents with tensor-core
// MMAs, and a kernel that executes MMAs (mma.sync or wgmma, even one to 264 FFMA) runs at a
// lower clock than one that does not: on an H200, 1.815 GHz against 1.980 GHz for the same
// exponentials alone or with an MMA in a branch never taken.
#include <cstdio>
typedef unsigned int u32;
typedef unsigned long long u64;

enum Mix { EX2, EX2_MMA_SYNC, EX2_WGMMA, EX2_MMA_NEVER_RUN, FFMA_SPARSE_MMA };

__device__ __forceinline__ void mma_sync(float (&d)[4], const u32 (&a)[4]) {
  const u32 b = 0x3c003c00u;  // two f16 ones
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%8}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b));
}

// One m64n8k16 warpgroup MMA, A from registers, B (16×8 f16) from shared memory.
__device__ __forceinline__ void wgmma(float (&d)[4], const u32 (&a)[4], u64 desc) {
  asm volatile("wgmma.fence.sync.aligned;\n");
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, 1, "
      "1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc));
  asm volatile("wgmma.commit_group.sync.aligned;\n");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}

template <Mix MIX>
__global__ void __launch_bounds__(256) probe(float *sink, long long *clk, int iters) {
  __shared__ __align__(128) unsigned short b[16 * 8];
  for (int i = threadIdx.x; i < 16 * 8; i += blockDim.x) b[i] = 0x3c00;
  __syncthreads();
  long long c0 = clock64(), g0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f}, x[12];
  const u32 a[4] = {0x3c003c00u, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
  for (int i = 0; i < 12; ++i) x[i] = (threadIdx.x + i) * 1e-3f - 3.0f;
  // No swizzle: 8-row core matrices 128 bytes apart along K.
  const u32 addr = (u32)__cvta_generic_to_shared(b);
  const u64 desc = (u64)((addr & 0x3FFFF) >> 4) | ((u64)(128 >> 4) << 16) | ((u64)(256 >> 4) << 32);
  for (int it = 0; it < iters; ++it) {
    if (MIX == EX2_MMA_SYNC) mma_sync(d, a);
    if (MIX == EX2_WGMMA) wgmma(d, a, desc);
    if (MIX == EX2_MMA_NEVER_RUN && iters < 0) mma_sync(d, a);
    if (MIX == FFMA_SPARSE_MMA) {
      mma_sync(d, a);
#pragma unroll
      for (int r = 0; r < 256 / 12 + 1; ++r)
#pragma unroll
        for (int i = 0; i < 12; ++i) asm volatile("fma.rn.f32 %0, %0, %0, %0;" : "+f"(x[i]));
    } else {
#pragma unroll
      for (int i = 0; i < 12; ++i) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[i]));
    }
  }
  float s = d[0] + d[1] + d[2] + d[3];
  for (int i = 0; i < 12; ++i) s += x[i];
  if (s == 1.2345f) sink[0] = s;  // never: keeps the work
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    long long c1 = clock64(), g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    clk[0] = c1 - c0;
    clk[1] = g1 - g0;
  }
}

int main() {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, dev);
  float *sink;
  long long *clk;
  cudaMalloc(&sink, sizeof(float));
  cudaMallocManaged(&clk, 2 * sizeof(long long));
  struct Case {
    const char *name;
    void (*kernel)(float *, long long *, int);
    int iters;
  } cases[] = {
      {"12 ex2", probe<EX2>, 100000},
      {"12 ex2 + mma.sync", probe<EX2_MMA_SYNC>, 100000},
      {"12 ex2 + wgmma", probe<EX2_WGMMA>, 100000},
      {"12 ex2, mma never run", probe<EX2_MMA_NEVER_RUN>, 100000},
      {"264 ffma + mma.sync", probe<FFMA_SPARSE_MMA>, 20000},
  };
  printf("%s, %d SMs\n", prop.name, sms);
  for (const Case &c : cases) {
    c.kernel<<<4 * sms, 256>>>(sink, clk, 100);  // warm-up
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int r = 0; r < 2; ++r) {
      cudaEventRecord(e0);
      c.kernel<<<4 * sms, 256>>>(sink, clk, c.iters);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0.0f;
      cudaEventElapsedTime(&ms, e0, e1);
      const cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess) {
        printf("%s: %s\n", c.name, cudaGetErrorString(err));
        return 1;
      }
      printf("%-22s %7.1f ms  %.4f GHz  (%lld cycles in %lld ns)\n", c.name, ms,
             double(clk[0]) / double(clk[1]), clk[0], clk[1]);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
  }
  return 0;
}
