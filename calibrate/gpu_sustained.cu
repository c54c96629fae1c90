// ptdsim-calibrate — the sustained mode: one bf16 GEMM through cuBLASLt run
// back to back for seconds, so that a power-capped GPU's SM clock settles
// (interface: calib_gpu_sustained in gpu.h).  The burst is calib_gpu_gemmlt's
// own measurement (its CPU check and its timing, as every gemmlt record);
// the loop then runs the same call on data of the same distribution, in
// chunks each timed between two CUDA events, two chunks in flight so that
// the GPU never waits for the host, and reads the SM clock and board power
// through NVML after each chunk.
#include <chrono>
#include <dlfcn.h>
#include <string.h>

#include "gpu.h"
#include "gpu_common.cuh"
#include "gpu_gemmlt.cuh"

// NVML, opened at run time from the driver's libnvidia-ml.so.1, so that the
// harness needs no NVML to build and measures without it (no samples then).
// From the NVML API reference (nvml.h, CUDA 12/13): every call returns
// nvmlReturn_t, NVML_SUCCESS = 0; nvmlDeviceGetClockInfo with
// NVML_CLOCK_SM = 1 gives MHz; nvmlDeviceGetPowerUsage and
// nvmlDeviceGetEnforcedPowerLimit give milliwatts; the device is found by
// the PCI bus id CUDA reports (cudaDeviceGetPCIBusId), which holds whatever
// CUDA_VISIBLE_DEVICES renumbers.
typedef int (*NvmlVoidFn)(void);
typedef int (*NvmlByBusFn)(const char *, void **);
typedef int (*NvmlClockFn)(void *, int, unsigned *);
typedef int (*NvmlMilliwattsFn)(void *, unsigned *);
#define NVML_CLOCK_SM_ 1

struct Nvml {
  void *lib, *dev;
  NvmlVoidFn shutdown;
  NvmlClockFn clock;
  NvmlMilliwattsFn power, limit;
};

static void nvml_close(Nvml *n) {
  if (n->shutdown)
    n->shutdown();
  if (n->lib)
    dlclose(n->lib);
  memset(n, 0, sizeof *n);
}

// Opens NVML for CUDA device `device`; on any failure leaves n empty (the
// loop then records no samples).
static void nvml_open(int device, Nvml *n) {
  memset(n, 0, sizeof *n);
  char bus[32];
  if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, device) != cudaSuccess)
    return;
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib)
    return;
  NvmlVoidFn init = reinterpret_cast<NvmlVoidFn>(dlsym(n->lib, "nvmlInit_v2"));
  NvmlByBusFn by_bus = reinterpret_cast<NvmlByBusFn>(dlsym(n->lib, "nvmlDeviceGetHandleByPciBusId_v2"));
  n->clock = reinterpret_cast<NvmlClockFn>(dlsym(n->lib, "nvmlDeviceGetClockInfo"));
  n->power = reinterpret_cast<NvmlMilliwattsFn>(dlsym(n->lib, "nvmlDeviceGetPowerUsage"));
  n->limit = reinterpret_cast<NvmlMilliwattsFn>(dlsym(n->lib, "nvmlDeviceGetEnforcedPowerLimit"));
  NvmlVoidFn shutdown = reinterpret_cast<NvmlVoidFn>(dlsym(n->lib, "nvmlShutdown"));
  if (!init || !by_bus || !n->clock || !n->power || !n->limit || !shutdown || init() != 0) {
    nvml_close(n);
    return;
  }
  n->shutdown = shutdown;
  if (by_bus(bus, &n->dev) != 0)
    nvml_close(n);
}

extern "C" int calib_gpu_sustained(int device, unsigned long long m, unsigned long long n, unsigned long long k,
                                   double seconds, unsigned chunk, CalibGpuTiming *burst, CalibGpuSustained *out,
                                   char *err, size_t errlen) {
  int rc = 0;
  unsigned tile_m = 0, tile_n = 0;
  cudaStream_t s = nullptr;
  cublasLtHandle_t h = nullptr;
  void *A = nullptr, *B = nullptr, *ws = nullptr;
  __nv_bfloat16 *D = nullptr;
  cudaEvent_t ev[2][2] = {{nullptr, nullptr}, {nullptr, nullptr}};
  Nvml nv;
  memset(&nv, 0, sizeof nv);
  LtGemm g;
  memset(&g, 0, sizeof g);
  size_t na = (size_t)m * k, nb = (size_t)k * n, nd = (size_t)m * n;
  double flops = 2.0 * (double)m * (double)n * (double)k;
  out->n_chunks = out->n_samples = 0;
  out->loop_s = out->power_limit_W = 0;
  // The forward's layout (TN), as Transformer Engine calls it.
  CHECK_RC(calib_gpu_gemmlt(device, 0, 1, 0, m, n, k, &tile_m, &tile_n, burst, err, errlen));
  CUDA_OK(cudaSetDevice(device));
  CUDA_OK(cudaStreamCreate(&s));
  CUBLAS_OK(cublasLtCreate(&h));
  CUDA_OK(cudaMalloc(&ws, LT_WORKSPACE_BYTES));
  CHECK_RC(lt_gemm_create(&g, h, s, ws, LT_WORKSPACE_BYTES, 0, 0, 1, 0, m, n, k, nullptr, nullptr, err, errlen));
  CUDA_OK(cudaMalloc(&A, na * sizeof(__nv_bfloat16)));
  CUDA_OK(cudaMalloc(&B, nb * sizeof(__nv_bfloat16)));
  CUDA_OK(cudaMalloc(&D, nd * sizeof *D));
  // Pseudo-random operands as the burst's: a GPU draws less power on zeros.
  fill_kernel<__nv_bfloat16><<<grid_for(na), 256, 0, s>>>((__nv_bfloat16 *)A, na, LT_SEED_A, 1.0f);
  fill_kernel<__nv_bfloat16><<<grid_for(nb), 256, 0, s>>>((__nv_bfloat16 *)B, nb, LT_SEED_B, 1.0f);
  CUDA_OK(cudaGetLastError());
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      CUDA_OK(cudaEventCreate(&ev[i][j]));
  CUDA_OK(cudaStreamSynchronize(s));
  nvml_open(device, &nv);
  {
    unsigned mw = 0;
    if (nv.dev && nv.limit(nv.dev, &mw) == 0)
      out->power_limit_W = mw / 1000.0;
    auto t0 = std::chrono::steady_clock::now();
    unsigned issued = 0;
    auto issue = [&](unsigned slot) -> int {
      int r = 0;
      if (cudaEventRecord(ev[slot][0], s) != cudaSuccess)
        return failf(err, errlen, "cudaEventRecord failed before a sustained chunk");
      for (unsigned i = 0; i < chunk && r == 0; i++)
        r = lt_gemm_run(&g, A, B, D, nullptr, nullptr, err, errlen);
      if (r == 0 && cudaEventRecord(ev[slot][1], s) != cudaSuccess)
        return failf(err, errlen, "cudaEventRecord failed after a sustained chunk");
      return r;
    };
    CHECK_RC(issue(0));
    issued = 1;
    for (unsigned done = 0; done < issued; done++) {
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (elapsed < seconds && issued < out->max_chunks) { // the next chunk queued behind this one
        CHECK_RC(issue(issued % 2));
        issued++;
      }
      unsigned slot = done % 2;
      float ms = 0;
      CUDA_OK(cudaEventSynchronize(ev[slot][1]));
      CUDA_OK(cudaEventElapsedTime(&ms, ev[slot][0], ev[slot][1]));
      out->chunk_tflops[out->n_chunks++] = flops * chunk / (ms * 1e-3) / 1e12;
      unsigned mhz = 0, milliwatts = 0;
      if (nv.dev && nv.clock(nv.dev, NVML_CLOCK_SM_, &mhz) == 0 &&
          nv.power(nv.dev, &milliwatts) == 0) {
        out->clock_MHz[out->n_samples] = mhz;
        out->power_W[out->n_samples++] = milliwatts / 1000.0;
      }
    }
    out->loop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
done:
  nvml_close(&nv);
  lt_gemm_destroy(&g);
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      if (ev[i][j])
        cudaEventDestroy(ev[i][j]);
  cudaFree(A);
  cudaFree(B);
  cudaFree(D);
  cudaFree(ws);
  if (h)
    cublasLtDestroy(h);
  if (s)
    cudaStreamDestroy(s);
  return rc;
}
