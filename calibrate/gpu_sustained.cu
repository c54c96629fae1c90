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
#include <stdio.h>
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
// CUDA_VISIBLE_DEVICES renumbers.  The power limit (milliwatts):
// nvmlDeviceGetPowerManagementLimit reads the one set,
// nvmlDeviceGetPowerManagementLimitConstraints its allowed range, and
// nvmlDeviceSetPowerManagementLimit sets it (root only:
// NVML_ERROR_NO_PERMISSION = 4; NVML_ERROR_NOT_SUPPORTED = 3).
typedef int (*NvmlVoidFn)(void);
typedef int (*NvmlByBusFn)(const char *, void **);
typedef int (*NvmlClockFn)(void *, int, unsigned *);
typedef int (*NvmlMilliwattsFn)(void *, unsigned *);
typedef int (*NvmlRangeFn)(void *, unsigned *, unsigned *);
typedef int (*NvmlSetFn)(void *, unsigned);
#define NVML_CLOCK_SM_ 1
#define NVML_ERROR_NOT_SUPPORTED_ 3
#define NVML_ERROR_NO_PERMISSION_ 4

struct Nvml {
  void *lib, *dev;
  NvmlVoidFn shutdown;
  NvmlClockFn clock;
  NvmlMilliwattsFn power, limit, set_limit_now;
  NvmlRangeFn limit_range;
  NvmlSetFn set_limit;
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
  // optional: only --power-limit needs them
  n->set_limit_now = reinterpret_cast<NvmlMilliwattsFn>(dlsym(n->lib, "nvmlDeviceGetPowerManagementLimit"));
  n->limit_range = reinterpret_cast<NvmlRangeFn>(dlsym(n->lib, "nvmlDeviceGetPowerManagementLimitConstraints"));
  n->set_limit = reinterpret_cast<NvmlSetFn>(dlsym(n->lib, "nvmlDeviceSetPowerManagementLimit"));
  NvmlVoidFn shutdown = reinterpret_cast<NvmlVoidFn>(dlsym(n->lib, "nvmlShutdown"));
  if (!init || !by_bus || !n->clock || !n->power || !n->limit || !shutdown || init() != 0) {
    nvml_close(n);
    return;
  }
  n->shutdown = shutdown;
  if (by_bus(bus, &n->dev) != 0)
    nvml_close(n);
}

// Sets the board's power limit to `watts`, the one in force kept in
// *previous_mw (0 where nothing was changed).  An error, and no change,
// where NVML is missing, refuses (not root) or the value is outside the
// board's range.
static int nvml_set_limit(Nvml *n, double watts, unsigned *previous_mw, char *err, size_t errlen) {
  *previous_mw = 0;
  if (!n->dev || !n->set_limit || !n->set_limit_now || !n->limit_range)
    return failf(err, errlen,
                 "--power-limit needs the driver's NVML library (libnvidia-ml.so.1) with its power-limit calls, "
                 "which did not load; set the limit with nvidia-smi -pl instead and run without --power-limit");
  unsigned now = 0, lo = 0, hi = 0, want = (unsigned)(watts * 1000.0 + 0.5);
  if (n->set_limit_now(n->dev, &now) != 0 || n->limit_range(n->dev, &lo, &hi) != 0)
    return failf(err, errlen, "NVML cannot read this GPU's power limit or its range; --power-limit cannot be applied");
  if (want < lo || want > hi)
    return failf(err, errlen, "--power-limit %g W is outside this GPU's range, %g to %g W; give a limit in it",
                 watts, lo / 1000.0, hi / 1000.0);
  int r = n->set_limit(n->dev, want);
  if (r == NVML_ERROR_NO_PERMISSION_)
    return failf(err, errlen,
                 "setting the power limit needs root (NVML refused: no permission); nothing was changed: run as root, "
                 "or set it with sudo nvidia-smi -pl %.0f and run without --power-limit",
                 watts);
  if (r == NVML_ERROR_NOT_SUPPORTED_)
    return failf(err, errlen, "this GPU does not let its power limit be set (NVML: not supported); nothing was changed");
  if (r != 0)
    return failf(err, errlen, "NVML could not set the power limit to %.0f W (error %d); nothing was changed", watts, r);
  *previous_mw = now;
  return 0;
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
  unsigned previous_mw = 0; // the limit to put back (0: none was changed)
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
  if (out->set_limit_W > 0)
    CHECK_RC(nvml_set_limit(&nv, out->set_limit_W, &previous_mw, err, errlen));
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
  if (previous_mw && nv.set_limit(nv.dev, previous_mw) != 0) {
    // the loop's result stands or its error goes first; the limit left set is said either way
    fprintf(stderr, "ptdsim-calibrate: NVML could not restore the power limit to %.0f W; restore it with sudo "
                    "nvidia-smi -pl %.0f\n", previous_mw / 1000.0, previous_mw / 1000.0);
    if (rc == 0)
      rc = failf(err, errlen, "the power limit could not be restored to %.0f W", previous_mw / 1000.0);
  }
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
