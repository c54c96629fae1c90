/* ptdsim — ZeRO data parallelism (Rajbhandari et al., "ZeRO: Memory
 * Optimizations Toward Training Trillion Parameter Models", SC20), as
 * DeepSpeed runs it and as SC21 section 5.2 compares it with PTD-P: no
 * tensor or pipeline parallelism, d = n replicas, B / (b d) microbatches
 * accumulated per iteration.
 *
 * Stage 1 shards the optimizer state (fp32 master weights and Adam's
 * moments) over the d GPUs; stage 2 also the fp16 gradients; stage 3 also
 * the fp16 parameters.  Communication, per the ZeRO paper (section 7):
 *  - stages 1 and 2: the gradients reduce-scattered (stage 1 once, after
 *    the last microbatch's backward; stage 2 per unit as each backward
 *    produces them, every microbatch) and the updated fp16 parameters
 *    all-gathered after the step;
 *  - stage 3: every unit's fp16 parameters all-gathered before its forward,
 *    again before its recomputation forward and again before its backward
 *    (DeepSpeed's pre-forward and pre-backward hooks release them after
 *    use), and its gradients reduce-scattered after its backward, every
 *    microbatch; the next unit's gather is prefetched while the current one
 *    computes, with at most two units' parameters live.
 * Units: the embedding (word and position), each layer, and the head (the
 * final layernorm, and the tied word embedding gathered again for the
 * logits).  Collectives run over all d GPUs through the same models as
 * everything else (models/comm.c, or the flow network).
 *
 * Memory per GPU: fp16 weights 2P (stage 3: 2P/d, plus two units gathered),
 * fp16 gradients 2P (stages 2 and 3: 2P/d), optimizer 12P/d, and one
 * microbatch's activations (Korthikanti et al., as for PTD-P with t = p = 1). */
#pragma once

#include "../plan/plan.h"
#include "../taskgraph/timeline.h"

/* Simulates one iteration of `plan` (plan->zero in 1..3, tp = pp = 1). */
gboolean sim_zero_run(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster, SimResult *r,
                      SimTimelineFn observe, gpointer data, GError **error);
/* Stage 3's coordinator over one microbatch, walked without simulating:
 * elements partitioned and kept whole, the most gathered at once, the
 * largest tensor gathered, the most gradient elements in one bucket, and
 * the collectives one microbatch issues with their buffers' bytes. */
typedef struct {
  guint64 sharded, persistent, live_peak, largest_gathered, bucket_peak;
  guint64 gathers, reductions;
  double gather_bytes, reduce_bytes;
} Stage3Memory;
void sim_zero3_memory(const SimPlan *plan, const ModelProfile *profile, Stage3Memory *out);
/* Memory only (no simulation). */
void sim_zero_memory(const SimPlan *plan, const ModelProfile *profile, ModelMemory *mem);
