/* ptdsim — device profiles: what a GPU can do, as the cost models need it.
 *
 * Two kinds.  An "analytic" profile describes a real device (peak rate, SMs,
 * HBM bandwidth, GEMM tiling, kernel launch gap), built from published
 * figures or fitted from measurements; every number in its JSON says where it
 * comes from.  The "ideal" profile is for teaching and tests: every
 * transformer layer's forward takes the same time per token, its backward
 * twice that, and everything else costs nothing.
 */
#pragma once

#include <glib.h>

#include "comm.h"

typedef enum { MODEL_PROFILE_ANALYTIC, MODEL_PROFILE_IDEAL } ModelProfileKind;

/* Classes of memory-bound kernels, each with its own fitted bandwidth
 * (models/compute.h): copies and layout changes; row reductions over the
 * hidden size (layernorm, RMSNorm, forward and backward); element-wise
 * kernels (dropout and residual adds, rotary, FP8 casts); the MLP's
 * activations (bias+GeLU, SwiGLU), whose tanh or exponential per element
 * can bind before the bandwidth does; Megatron's scale-mask-softmax over
 * attention scores; the vocab-parallel cross-entropy over the logits. */
typedef enum {
  MODEL_MEM_COPY,
  MODEL_MEM_NORM,
  MODEL_MEM_POINTWISE,
  MODEL_MEM_ACTIVATION,
  MODEL_MEM_SOFTMAX,
  MODEL_MEM_CROSS_ENTROPY,
  MODEL_MEM_N
} ModelMemClass;

#define MODEL_PROFILE_MAX_TILES 12
#define MODEL_PROFILE_MAX_COLL 16

/* A GEMM model of one operand type (models/compute.h): the tiles the
 * device's library chooses among, the K roll-off, the ceiling efficiency and
 * the tiles' operand bandwidth from L2. */
typedef struct {
  guint n_tiles;
  guint tile_m[MODEL_PROFILE_MAX_TILES];
  guint tile_n[MODEL_PROFILE_MAX_TILES];
  double k_half, efficiency_max, tile_bytes_per_s;
} ModelGemmParams;

/* Flash attention as thread-block waves (models/compute.h): one pass's
 * kernel splits the queries (forward) or the keys (backward) of every head
 * into tiles of tile_q rows, one thread block each, which walks the other
 * side in tiles of tile_kv; each (tile_q x tile_kv) step runs at
 * `efficiency` of one SM's share of the peak, and each block pays
 * cta_overhead_s for its own loads and stores. */
typedef struct {
  guint tile_q, tile_kv;
  double efficiency, cta_overhead_s;
} ModelFlashPass;
typedef struct {
  char *name;
  char *path; /* the file it was read from */
  ModelProfileKind kind;
  double peak_flops;     /* dense fp16/bf16 FLOP/s */
  /* Precisions the tensor cores run ("precisions": fp16, bf16, fp8; fp16
   * and bf16 where the profile does not say), the first the default, and
   * the dense FP8 rate where fp8 is one of them (peak_fp8_tflops). */
  guint n_precisions;
  char precisions[3][8];
  double peak_fp8_flops;
  guint sms;             /* streaming multiprocessors */
  /* SMs other kernels hold (a collective's, beside the compute): the GEMMs'
   * and attention's thread blocks are dealt over the other sms - sms_held,
   * each at its SM's rate (models/layer.h model_layer_contention); 0 on a
   * loaded profile */
  double sms_held; /* whole SMs, or k x channels with a fitted "overlap" block */
  /* The share of HBM bandwidth those kernels move (their sends read and
   * their receives written): memory-bound kernels and memory-bound GEMMs
   * get the rest; 0 on a loaded profile */
  double hbm_held;
  double memory_bytes;   /* device memory */
  double hbm_bytes_per_s;
  double memory_efficiency; /* achieved share of HBM bandwidth by streaming kernels */
  double kernel_launch_s;   /* gap per kernel on the GPU timeline */
  /* GEMM model of 16-bit operands (models/compute.c): best tile over its
   * shapes, wave quantization over the SMs, a K roll-off K/(K + k_half), a
   * ceiling efficiency e_max — derived so that the anchor shape reaches the
   * anchor rate (published profiles), or given as gemm.efficiency_max
   * (fitted) — and the tiles' operand bandwidth from L2
   * (gemm.tile_bandwidth_GBps), which bounds each tile's rate by its
   * arithmetic intensity (models/compute.h); 0: not limited. */
  ModelGemmParams gemm;
  /* Sustained over boost tensor-core rate in a long training run (power and
   * thermal clock limits); scales GEMM math only.  1 when not given. */
  double sustained_clock_ratio;
  /* The power model (optional "power" block): board power at SM clock f
   * under a GEMM loop, P(f) = idle_W + (rated_W - idle_W) *
   * (f / sustained_clock_MHz)^exponent, where sustained_clock_MHz is the
   * clock the GEMM loop settled at under the rated cap rated_W; a cap C
   * allows the clock where P(f) = C, at most boost_clock_MHz
   * (model_power_clock_MHz).  Absent: has_power FALSE.  Why a power law:
   * a chip's dynamic power is alpha C V^2 f (Weste and Harris, "CMOS VLSI
   * Design", 4th ed., chapter 5), and in the DVFS range its voltage rises
   * about linearly with its clock, so dynamic power goes as f^3 (Mei, Wang
   * and Chu, "A survey and measurement study of GPU DVFS on energy
   * conservation", Digital Communications and Networks 3(2), 2017):
   * exponent 3 unless measurements at several caps fit it (fit/fit.c). */
  gboolean has_power;
  /* What a collective's kernels take from the compute beside them
   * (optional "overlap" block, fitted from ptdsim-calibrate's overlap
   * mode): the SMs one channel's thread block holds (sms_per_channel) and
   * the HBM traffic of memory-bound work it displaces per byte the
   * collective moves at its bus rate (hbm_bytes_per_byte).  Without it,
   * MODEL_OVERLAP_SMS_PER_CHANNEL and MODEL_OVERLAP_HBM_BYTES_PER_BYTE
   * (model_profile_overlap). */
  gboolean has_overlap;
  double overlap_sms_per_channel, overlap_hbm_bytes_per_byte;
  double power_rated_W, power_idle_W, power_boost_clock_MHz, power_sustained_clock_MHz, power_exponent;
  /* Ideal profile: forward time of one layer per token processed. */
  double ideal_layer_s_per_token;
  /* FlashAttention-2 (optional "attention" block): the share of peak its
   * forward and backward kernels reach on the FLOPs they execute; 0 where
   * the device has no figure (then --attention flash is refused); and
   * whether flash is the device's default attention (Megatron's kernels
   * otherwise). */
  double flash_forward_efficiency, flash_backward_efficiency;
  gboolean flash_default;
  /* The waves model of flash attention (attention.forward and
   * attention.backward blocks); without it, the constant shares above.
   * flash_ctas_per_sm: thread blocks resident per SM. */
  gboolean flash_waves;
  ModelFlashPass flash[2]; /* forward, backward */
  double flash_ctas_per_sm;
  /* FP8 GEMMs (optional gemm_fp8 block): their own tiles, roll-off and
   * ceiling; without it, the 16-bit model at the FP8 peak with 1-byte
   * operands.  gemm_fp8_split_accumulation: the share of the FP8 rate the
   * gradient GEMMs keep when Transformer Engine promotes their partial sums
   * to fp32 (its dgrad and wgrad GEMMs; the forward runs with fast
   * accumulation); 1 when not given. */
  gboolean has_gemm_fp8;
  ModelGemmParams gemm_fp8;
  double gemm_fp8_split_accumulation;
  /* Memory-bound kernels by class (optional "membound" block of a fitted
   * profile): a gap per kernel and a bandwidth for data that stays in L2
   * (l2_bytes) and for data that does not. */
  gboolean has_membound;
  double mem_gap_s[MODEL_MEM_N], mem_hbm_bytes_per_s[MODEL_MEM_N], mem_l2_bytes_per_s[MODEL_MEM_N];
  /* Megatron's 2021 kernels (optional "membound_2021" block): the same
   * classes as the 2021 layer runs them (fused softmax, bias-GeLU and
   * bias-dropout-add, the apex layernorm), where a GPU runs them at another
   * rate than today's vectorized kernels; classes it does not name are
   * priced as "membound" prices them.  A layer without flash attention is
   * the 2021 layer and uses these. */
  gboolean has_membound_2021;
  double mem_2021_gap_s[MODEL_MEM_N], mem_2021_hbm_bytes_per_s[MODEL_MEM_N], mem_2021_l2_bytes_per_s[MODEL_MEM_N];
  double l2_bytes; /* "l2_MiB"; 0: not given (every kernel at its HBM bandwidth) */
  /* Optional "collectives" block of a fitted profile: collectives measured
   * on one node, used instead of the cluster's intra-node model. */
  guint n_coll;
  ModelCollFit coll[MODEL_PROFILE_MAX_COLL];
} ModelProfile;

#define MODEL_PROFILE_ERROR (model_profile_error_quark())
GQuark model_profile_error_quark(void);

/* Loads a profile by shipped name (calibrate/profiles/NAME.json) or path. */
ModelProfile *model_profile_load(const char *name_or_file, GError **error);
/* A profile from its description `root` (not taken); `path` is where it
 * came from, for errors and provenance. */
ModelProfile *model_profile_from_json(const cJSON *root, const char *path, GError **error);
void model_profile_free(ModelProfile *p);
/* The SM clock (MHz) a board power cap of cap_W (> power_idle_W) allows a
 * profile with a power model: P(f) solved for f at cap_W, at most the boost
 * clock. */
double model_power_clock_MHz(const ModelProfile *p, double cap_W);
/* The sustained_clock_ratio a GEMM sees under a board power cap of cap_W
 * (> power_idle_W): the GEMM rate scales with the clock, so the profile's
 * sustained_clock_ratio (the measured rate ratio at the rated cap) times
 * f(cap_W) / sustained_clock_MHz; exactly sustained_clock_ratio at the
 * rated cap, and at most 1 (the burst rates the profile was fitted at). */
double model_power_clock_ratio(const ModelProfile *p, double cap_W);
/* Without a measured "overlap" block: NCCL runs one thread block per
 * channel, each on an SM of its own (its kernels are launched with
 * nChannels blocks: src/enqueue.cc), and a collective's bytes pass through
 * HBM twice, read as sent and written as received. */
#define MODEL_OVERLAP_SMS_PER_CHANNEL 1.0
#define MODEL_OVERLAP_HBM_BYTES_PER_BYTE 2.0
/* The profile's SMs per channel and HBM bytes per byte moved: its
 * "overlap" block's, else the defaults above. */
void model_profile_overlap(const ModelProfile *p, double *sms_per_channel, double *hbm_bytes_per_byte);
/* Whether the device runs `precision` ("fp16", "bf16", "fp8"). */
gboolean model_profile_supports(const ModelProfile *p, const char *precision);
