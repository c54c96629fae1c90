/* ptdsim — a whole training run's time: failures, restarts and checkpoints.
 *
 * One iteration's simulated time says how fast a perfect cluster trains.  A
 * real run of N iterations is interrupted: every GPU, node and switch fails
 * at some rate, each interruption costs a restart (job launch, NCCL
 * initialisation, the checkpoint read back) plus the work done since the
 * last checkpoint, and every checkpoint costs time too.  This room turns one
 * iteration's result and the memory model's checkpoint size into the run's
 * wall-clock days, GPU-hours and effective training time (useful training
 * time over elapsed time, as the Llama 3 report measures it), analytically
 * and by a Monte-Carlo of the run.
 *
 * The model (doc/runtime.md):
 * - Failures arrive as a Poisson process while the job runs, at rate
 *   lambda = gpus x gpu_rate + nodes x node_rate + switches x switch_rate;
 *   none arrive while it restarts.  The default rates are the Llama 3 405B
 *   run's (Dubey et al. 2024, "The Llama 3 Herd of Models", arXiv:2407.21783,
 *   section 3.3.4, Table 5: 419 unexpected interruptions in 54 days on 16,384
 *   H100s), split by cause (RT_LLAMA3_* below).
 * - The run is segments of k iterations (tau = k x iteration seconds of
 *   work), each ended by a checkpoint that blocks the job for delta seconds:
 *   the write of the whole checkpoint to storage when synchronous; when
 *   asynchronous, the copy of the busiest GPU's share to host memory, plus
 *   any wait for the previous write (the next snapshot waits for it).
 * - An interruption costs R = restart + checkpoint read (+ the wait for a
 *   repaired node when no spare is free) and rolls the job back to the last
 *   checkpoint on storage; an asynchronous checkpoint is on storage only
 *   write seconds after its snapshot.
 * - Synchronous: a segment of length L = tau + delta takes, in expectation,
 *   (e^{lambda L} - 1) (1/lambda + R) (the failed attempts are geometric,
 *   each costing E[min(X, L)] + R with X exponential), exactly; the run is
 *   the sum over its segments.  Asynchronous: the first-order expectation
 *   (each interruption also loses the write window); the Monte-Carlo runs
 *   the exact rule.
 * - The interval: Daly's higher-order optimum (J. T. Daly, "A higher order
 *   estimate of the optimum checkpoint interval for restart dumps", FGCS 22,
 *   2006, eq. 37), rounded to whole iterations, unless given; Young's
 *   first-order sqrt(2 delta M) (J. W. Young, CACM 17(9), 1974) is reported
 *   beside it. */
#pragma once

#include <glib.h>

#include "../plan/plan.h"

/* The Llama 3 405B pre-training run (arXiv:2407.21783, section 3.3.4 and
 * Table 5): 419 unexpected interruptions in a 54-day snapshot on 16,384
 * H100 GPUs (2,048 nodes of 8).  By cause: 268 attributed to the GPU
 * (faulty GPU 148, HBM3 72, SRAM 19, GPU system processor 17, silent data
 * corruption 6, thermal interface and sensor 6); 35 to network switches and
 * cables; the other 116 to the host, its NIC, storage and software (software
 * bugs 54, host maintenance 32, NIC 7, NCCL watchdog 7, SSD 3, power supply
 * 3, chassis 2, IO expansion board 2, dependency 2, CPU 2, system memory
 * 2).  Switches: one top-of-rack switch per 16 GPUs, as that cluster's
 * racks (section 3.3.1), cables and upper tiers folded in. */
#define RT_LLAMA3_GPUS 16384.0
#define RT_LLAMA3_HOURS (54.0 * 24.0)
#define RT_LLAMA3_GPU_FAILURES 268.0
#define RT_LLAMA3_NODE_FAILURES 116.0
#define RT_LLAMA3_SWITCH_FAILURES 35.0
#define RT_GPUS_PER_SWITCH 16u
#define RT_DEFAULT_GPU_RATE (RT_LLAMA3_GPU_FAILURES / (RT_LLAMA3_GPUS * RT_LLAMA3_HOURS))
#define RT_DEFAULT_NODE_RATE (RT_LLAMA3_NODE_FAILURES / (RT_LLAMA3_GPUS / 8.0 * RT_LLAMA3_HOURS))
#define RT_DEFAULT_SWITCH_RATE (RT_LLAMA3_SWITCH_FAILURES / (RT_LLAMA3_GPUS / RT_GPUS_PER_SWITCH * RT_LLAMA3_HOURS))
/* Assumptions where no published figure is used (doc/runtime.md). */
#define RT_DEFAULT_RESTART_S 600.0         /* job relaunch, health checks, NCCL init: 10 minutes */
#define RT_DEFAULT_STORAGE_NODE_GBPS 25.0  /* one 200 Gbit/s front-end link per node */
#define RT_DEFAULT_STORAGE_GBPS 2000.0     /* Llama 3's Tectonic: 2 TB/s sustained (section 3.3.1) */
#define RT_DEFAULT_HOST_COPY_GBPS 25.0     /* device to pinned host memory over PCIe Gen5, per GPU */
#define RT_DEFAULT_REPAIR_HOURS 24.0       /* a failed node back in the pool */

/* The checkpoint interval as given: iterations, or seconds (rounded to
 * whole iterations); neither: Daly's optimum. */
typedef struct {
  guint64 iterations;
  double seconds;
} RtInterval;

/* The whole-run options (what the command line gave, defaults filled). */
typedef struct {
  double gpu_rate, node_rate, switch_rate; /* failures per hour, per GPU / node / switch */
  double restart_s;
  double storage_node_Bps, storage_Bps, host_copy_Bps;
  gboolean async;
  RtInterval every;
  gint64 spares; /* hot spare nodes; -1: as many as needed */
  double repair_s;
  guint trials; /* Monte-Carlo trials; 0: none */
  guint64 seed;
} RtOptions;

void rt_options_default(RtOptions *o);

/* One iteration and the machine, as the run needs them. */
typedef struct {
  double iteration_s;
  double tokens_per_iteration;
  double tokens;            /* the budget */
  guint gpus, gpus_per_node;
  double checkpoint_bytes;  /* the whole model's state on storage */
  double rank_bytes;        /* the busiest GPU's share of it (its snapshot) */
} RtInput;

typedef struct {
  /* the run */
  guint64 iterations;
  guint nodes, switches;
  double failures_per_hour, mtbf_hours, node_share; /* node_share: the failures that take a node out */
  /* checkpoints */
  double checkpoint_bytes, write_s, read_s, blocking_s;
  double young_s, daly_s;   /* optimum work between checkpoints */
  guint64 every_iterations; /* the interval used */
  gboolean every_given;
  double restart_s;         /* an interruption's cost besides the lost work */
  /* the expectation */
  double ideal_days, expected_days, gpu_hours, effective_training_time;
  double interruptions, checkpoints, lost_work_hours, checkpoint_hours, restart_hours;
  gboolean exact; /* the expectation is exact (synchronous, spares unlimited or none) */
  double spares_exhausted_probability;
  /* the Monte-Carlo (trials > 0) */
  guint trials;
  guint64 seed;
  double mc_mean_days, mc_stderr_days, mc_median_days, mc_p90_days, mc_interruptions;
} RtResult;

#define RT_ERROR (rt_error_quark())
GQuark rt_error_quark(void);

/* The checkpoint of a plan by the memory model (models/memory.h): the
 * 16-bit weights and the 12 bytes of optimizer state of every parameter,
 * stored once (data-parallel replicas hold copies); and the busiest GPU's
 * weights and optimizer shard. */
void rt_checkpoint_bytes(const SimPlan *plan, const SimResult *r, double *total, double *rank);

/* Young's and Daly's optimum work between checkpoints for a checkpoint
 * costing delta seconds and a mean time between failures of M seconds. */
double rt_young_interval(double delta_s, double mtbf_s);
double rt_daly_interval(double delta_s, double mtbf_s);
/* The expected time of a segment of L seconds (work and checkpoint) at
 * failure rate lambda (per second), each failure costing R seconds and
 * the segment restarted: (e^{lambda L} - 1)(1/lambda + R); L when lambda is 0. */
double rt_segment_expected_s(double L, double lambda, double R);

/* The whole run: one-line errors (an interval below one iteration or
 * longer than the run, rates below zero). */
gboolean rt_run(const RtInput *in, const RtOptions *o, RtResult *out, GError **error);
