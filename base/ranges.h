/* ptdsim — the physical range of every number read from a cluster, a
 * profile or a measurements file, with its unit (doc/inputs.md lists them,
 * key by key).  A value outside its range is a one-line error naming the
 * file, the key path and the range, so that no input can push the
 * simulator's integer nanosecond clock past what it can hold. */
#pragma once

#include "jsonutil.h"

extern const PtdRange ptd_range_bandwidth_GBps; /* links, NICs, HBM, collectives' busbw */
extern const PtdRange ptd_range_latency_us;     /* latencies, kernel launches, NCCL's constants */
extern const PtdRange ptd_range_efficiency;     /* shares of a peak: (0, 1], at least 0.01 */
extern const PtdRange ptd_range_tflops;         /* peak and anchor rates */
extern const PtdRange ptd_range_memory_GiB;     /* device memory */
extern const PtdRange ptd_range_ns_per_token;   /* the ideal profile's layer time */
extern const PtdRange ptd_range_gemm_dim;       /* GEMM sizes m, n, k and k_half */
extern const PtdRange ptd_range_sms;            /* streaming multiprocessors */
extern const PtdRange ptd_range_nodes;          /* nodes of a cluster */
extern const PtdRange ptd_range_per_node;       /* GPUs, NICs, CPUs, PCIe switches of a node */
extern const PtdRange ptd_range_nvlink_domain;  /* GPUs of one NVLink domain */
extern const PtdRange ptd_range_nvls_channels;  /* NCCL's NVLS channels: at least 2 */
extern const PtdRange ptd_range_cpus;           /* CPUs of a node (0: none modelled) */
extern const PtdRange ptd_range_channels;
extern const PtdRange ptd_range_time_us;        /* measured times */
extern const PtdRange ptd_range_bytes;          /* measured sizes */
extern const PtdRange ptd_range_count;          /* measured shapes and counts */
extern const PtdRange ptd_range_repetitions;    /* warm-up and timed runs: may be 0 */
extern const PtdRange ptd_range_cache_MiB;      /* L2 cache */
extern const PtdRange ptd_range_tile;           /* a kernel's tile edge */
extern const PtdRange ptd_range_ctas_per_sm;    /* thread blocks resident per SM */
extern const PtdRange ptd_range_seconds;        /* a measurement loop's length */
extern const PtdRange ptd_range_power_W;
extern const PtdRange ptd_range_price;          /* a GPU-hour's price: above 0 */
extern const PtdRange ptd_range_overlap_sms;    /* SMs a collective's channel holds */
extern const PtdRange ptd_range_overlap_bytes;  /* HBM traffic per byte a collective moves */        /* board power and power limits */
extern const PtdRange ptd_range_clock_MHz;      /* a device profile's clocks */
extern const PtdRange ptd_range_power_exponent; /* how steeply board power rises with the SM clock */
extern const PtdRange ptd_range_device_info;    /* clocks (MHz) and bus width (bits) recorded: 0 when unknown */       /* NCCL channels per network peer */

/* The most GPUs a cluster may have: its link graph and routes are built
 * for every GPU. */
#define PTD_MAX_CLUSTER_GPUS 262144u
/* The most NICs one NVLink domain may have (NVL576: 576 GPUs, one NIC each). */
#define PTD_MAX_DOMAIN_NICS 1024u
