/* ptdsim — the physical ranges of input numbers (see ranges.h). */
#include "ranges.h"

const PtdRange ptd_range_bandwidth_GBps = {1e-3, 1e6, FALSE, FALSE, "GB/s"};
const PtdRange ptd_range_latency_us = {0, 1e5, FALSE, FALSE, "us"};
const PtdRange ptd_range_efficiency = {0.01, 1, FALSE, FALSE, "(a share of the peak)"};
const PtdRange ptd_range_tflops = {1e-3, 1e6, FALSE, FALSE, "TFLOP/s"};
const PtdRange ptd_range_memory_GiB = {1e-3, 1e6, FALSE, FALSE, "GiB"};
const PtdRange ptd_range_ns_per_token = {1e-3, 1e6, FALSE, FALSE, "ns"};
const PtdRange ptd_range_gemm_dim = {1, 1e7, FALSE, FALSE, "elements"};
const PtdRange ptd_range_sms = {1, 4096, FALSE, TRUE, "SMs"};
const PtdRange ptd_range_nodes = {1, PTD_MAX_CLUSTER_GPUS, FALSE, TRUE, "nodes"};
const PtdRange ptd_range_per_node = {1, 256, FALSE, TRUE, "per node"};
const PtdRange ptd_range_nvlink_domain = {1, 576, FALSE, TRUE, "GPUs"};
const PtdRange ptd_range_nvls_channels = {2, 64, FALSE, TRUE, "channels"};
const PtdRange ptd_range_cpus = {0, 16, FALSE, TRUE, "CPUs"};
const PtdRange ptd_range_channels = {1, 32, FALSE, TRUE, "channels"};
const PtdRange ptd_range_time_us = {1e-3, 1e10, FALSE, FALSE, "us"}; /* 1 ns: no kernel is shorter */
const PtdRange ptd_range_bytes = {1, 1e15, FALSE, FALSE, "bytes"};
const PtdRange ptd_range_count = {1, 1e9, FALSE, TRUE, ""};
const PtdRange ptd_range_repetitions = {0, 1e9, FALSE, TRUE, ""};
const PtdRange ptd_range_seconds = {1e-3, 1e6, FALSE, FALSE, "s"};
const PtdRange ptd_range_power_W = {1, 1e5, FALSE, FALSE, "W"};
const PtdRange ptd_range_price = {0, 1e6, TRUE, FALSE, "dollars per GPU-hour"};
const PtdRange ptd_range_clock_MHz = {1, 1e5, FALSE, FALSE, "MHz"};
const PtdRange ptd_range_overlap_sms = {0, 16, TRUE, FALSE, "SMs per channel"};
const PtdRange ptd_range_overlap_bytes = {0, 16, TRUE, FALSE, "HBM bytes per byte moved"};
const PtdRange ptd_range_power_exponent = {1, 6, FALSE, FALSE, "(power rises as the clock to this power)"};
const PtdRange ptd_range_device_info = {0, 1e6, FALSE, FALSE, "MHz or bits"};
const PtdRange ptd_range_cache_MiB = {1e-3, 1e6, FALSE, FALSE, "MiB"};
const PtdRange ptd_range_tile = {1, 4096, FALSE, TRUE, "elements"};
const PtdRange ptd_range_ctas_per_sm = {1, 64, FALSE, TRUE, "thread blocks"};
