/* ptdsim — α–β collective model after NCCL's tuner (see comm.h). */
#include "comm.h"

#include <math.h>

double model_busbw_factor(ModelCollOp op, guint ranks) {
  if (op == MODEL_COLL_SENDRECV)
    return 1;
  if (op == MODEL_COLL_ALLTOALL)
    return ranks > 1 ? (double)(ranks - 1) / ranks : 0;
  if (op == MODEL_COLL_BROADCAST)
    return ranks > 1 ? 1 : 0;
  if (ranks <= 1)
    return 0;
  double n = ranks;
  return op == MODEL_COLL_ALLREDUCE ? 2.0 * (n - 1) / n : (n - 1) / n;
}

double model_coll_fit_time_s(const ModelCollFit *f, double bus_bytes) {
  double best = INFINITY;
  for (guint r = 0; r < f->n_ranges; r++)
    best = fmin(best, f->alpha_s[r] + bus_bytes / f->busbw[r]);
  return best;
}

static const ModelCollFit *find_measured(const ModelNet *net, ModelCollOp op, guint ranks) {
  for (guint i = 0; i < net->n_measured; i++)
    if (net->measured[i].op == op && net->measured[i].ranks == ranks)
      return &net->measured[i];
  return NULL;
}

double model_collective_time_s(const ModelNet *net, ModelCollOp op, double bytes, guint ranks, guint nodes,
                               TopoProto *proto_out) {
  if (proto_out)
    *proto_out = TOPO_PROTO_SIMPLE;
  if (net->free_comm || ranks <= 1 || bytes <= 0)
    return 0;
  nodes = CLAMP(nodes, 1, ranks);
  const ModelCollFit *fit = nodes == 1 ? find_measured(net, op, ranks) : NULL;
  if (fit)
    return model_coll_fit_time_s(fit, bytes * model_busbw_factor(op, ranks));
  double per_node = (double)ranks / nodes;
  double bw = net->hw.nvlink_busbw;
  if (nodes > 1)
    bw = fmin(bw, per_node * net->hw.nic_bw * net->hw.nics_per_node / net->hw.gpus_per_node);
  /* Ring steps: an all-reduce is a reduce-scatter then an all-gather. */
  guint steps = (op == MODEL_COLL_ALLREDUCE ? 2 : 1) * (ranks - 1);
  guint inter = nodes > 1 ? (op == MODEL_COLL_ALLREDUCE ? 2 : 1) * nodes : 0;
  guint intra = steps > inter ? steps - inter : 0;
  double bus_bytes = bytes * model_busbw_factor(op, ranks);
  double best = INFINITY;
  for (int p = 0; p < TOPO_N_PROTOS; p++) {
    double t = net->hw.ring_base[p] + intra * net->hw.nvlink_hop[p] + inter * net->hw.net_hop[p] +
               bus_bytes / (bw * net->hw.proto_bw_factor[p]);
    if (t < best) {
      best = t;
      if (proto_out)
        *proto_out = (TopoProto)p;
    }
  }
  /* NVLS inside one NVLink domain, where the cluster's NCCL has it: chosen
   * by the tuner's model (topo_nvls_algbw), Simple protocol only; it takes
   * the time NVLS moves its bytes in (topo_nvls_exec) */
  double nvls = nodes == 1 && op <= MODEL_COLL_REDUCESCATTER
                    ? topo_nvls_algbw(&net->hw, op == MODEL_COLL_ALLREDUCE, ranks)
                    : 0;
  if (nvls > 0 && net->hw.nvls_latency + bytes / nvls < best) {
    double out, in;
    TopoNvlsOp nop = op == MODEL_COLL_ALLREDUCE   ? TOPO_NVLS_ALLREDUCE
                     : op == MODEL_COLL_ALLGATHER ? TOPO_NVLS_ALLGATHER
                                                  : TOPO_NVLS_REDUCESCATTER;
    double rate = topo_nvls_exec(&net->hw, nop, ranks, &out, &in);
    best = net->hw.nvls_latency + bytes * fmax(out, in) / rate;
    if (proto_out)
      *proto_out = TOPO_PROTO_SIMPLE;
  }
  return best;
}

double model_p2p_net_rate(const TopoNet *hw, double bytes) {
  double channels = topo_p2p_channels(hw, bytes);
  return hw->p2p_channel_bw > 0 ? fmin(hw->nic_bw, channels * hw->p2p_channel_bw) : hw->nic_bw;
}

double model_p2p_time_s(const ModelNet *net, double bytes, gboolean same_node) {
  if (net->free_comm || bytes <= 0)
    return 0;
  const ModelCollFit *fit = same_node ? find_measured(net, MODEL_COLL_SENDRECV, 2) : NULL;
  if (fit)
    return model_coll_fit_time_s(fit, bytes);
  return same_node ? net->hw.p2p_latency_intra + bytes / net->hw.nvlink_p2p_bw
                   : net->hw.p2p_latency_inter + bytes / model_p2p_net_rate(&net->hw, bytes);
}

double model_alltoall_time_s(const ModelNet *net, double bytes, guint ranks, guint nodes) {
  if (ranks <= 1 || bytes <= 0)
    return 0;
  nodes = CLAMP(nodes, 1, ranks);
  /* (n - 1)/n of the buffer leaves the rank over NVLink, (n - m)/n of it
   * to other nodes over the NICs: the two phases' bound */
  double n = ranks, m = n / nodes;
  return model_deepep_time_s(net, (n - m) / n * bytes, (n - 1) / n * bytes, nodes);
}

double model_deepep_time_s(const ModelNet *net, double ib_bytes, double nvl_bytes, guint nodes) {
  if (net->free_comm || (ib_bytes <= 0 && nvl_bytes <= 0))
    return 0;
  double t = nvl_bytes / net->hw.nvlink_busbw;
  if (nodes > 1)
    t = fmax(t, ib_bytes / (net->hw.nic_bw * net->hw.nics_per_node / net->hw.gpus_per_node));
  return (nodes > 1 ? net->hw.p2p_latency_inter : net->hw.p2p_latency_intra) + t;
}
