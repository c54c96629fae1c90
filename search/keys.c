/* ptdsim — what each `sweep --set` key moves (see keys.h).  The lines
 * follow the loaders (topologies/cluster.c, topologies/fabric.c,
 * models/profile.c) and the cost models that read each value
 * (doc/network.md, doc/model.md, doc/calibration.md). */
#include "keys.h"

#include <string.h>

#include "../base/jsonutil.h"

/* A pattern's components match the key's one by one; '*' matches any one. */
typedef struct {
  const char *pattern, *moves;
} KeyDoc;

static const KeyDoc docs[] = {
    /* the cluster */
    {"cluster.nodes", "the nodes the cluster has: the most GPUs a run may use (--nodes N sets it too)"},
    {"cluster.gpus_per_node", "GPUs of one host (and of one NVLink domain unless nvlink_domain_gpus says otherwise)"},
    {"cluster.nics_per_node", "NICs of one host: a node's bandwidth across nodes (with network.nic_GBps, or the "
                              "fabric's links) and NCCL's channels per collective"},
    {"cluster.nvlink_domain_gpus", "GPUs on one NVLink domain (several hosts on NVLink switch trays): where tensor "
                                   "and expert groups stay on NVLink"},
    {"cluster.gpu_power_limit_W", "the board power cap on every GPU: the GEMMs' clock, by the profile's power model"},
    {"cluster.price_per_gpu_hour", "dollars a GPU-hour: the reports' costs only"},
    {"cluster.nvlink.allreduce_busbw_GBps", "analytic network: NCCL's ring all-reduce bus bandwidth inside a node "
                                            "(tensor-parallel all-reduces, collectives of a node)"},
    {"cluster.nvlink.p2p_GBps", "analytic network: one send between two GPUs of a node (pipeline sends in a node)"},
    {"cluster.nvlink.p2p_latency_us", "point-to-point latency inside a node (both network models)"},
    {"cluster.network.nic_GBps", "analytic network: NCCL's bandwidth per NIC (every collective and send across "
                                 "nodes)"},
    {"cluster.network.p2p_latency_us", "point-to-point latency across nodes (both network models)"},
    {"cluster.nccl.ring_base_us.*", "NCCL's ring latency per collective for this protocol: small collectives' time "
                                    "and the tuner's choice"},
    {"cluster.nccl.nvlink_hop_us.*", "NCCL's ring latency per NVLink step for this protocol"},
    {"cluster.nccl.net_hop_us.*", "NCCL's ring latency per network step for this protocol"},
    {"cluster.nccl.tree_base_us.*", "NCCL's tree latency per collective for this protocol (trees only where given)"},
    {"cluster.nccl.tree_nvlink_hop_us.*", "NCCL's tree latency per NVLink step for this protocol"},
    {"cluster.nccl.tree_net_hop_us.*", "NCCL's tree latency per network step for this protocol"},
    {"cluster.nccl.protocol_bandwidth_factor.*", "the share of the bandwidth this protocol carries as data: its "
                                                 "speed and the tuner's choice"},
    {"cluster.nccl.channel_caps_GBps.*", "NCCL v2.12's cap per channel (or total) for this algorithm and node count: "
                                         "collectives' bandwidth"},
    {"cluster.nccl.p2p_channels_per_net_peer", "NCCL's channels for one peer of a send across nodes: pipeline "
                                               "sends across nodes"},
    {"cluster.nccl.p2p_channel_GBps", "what one such channel carries: pipeline sends across nodes"},
    {"cluster.nccl.collective_channels", "the channels (one SM each) a collective's kernels hold: how much compute "
                                         "beside a collective slows"},
    {"cluster.nccl.nvls.GBps", "NVLink SHARP: the GPU's NVLink bandwidth per direction as NCCL's tuner prices it"},
    {"cluster.nccl.nvls.efficiency", "NVLink SHARP: the share of that bandwidth reached"},
    {"cluster.nccl.nvls.channels", "NVLink SHARP: NCCL's channels for it"},
    {"cluster.nccl.nvls.latency_us", "NVLink SHARP: its latency per collective"},
    {"cluster.nccl.nvls.tree.*", "NVLS-tree across nodes: its per-step latency and channel caps"},
    {"cluster.fabric.node.nvswitch.GBps", "flow network: each GPU's NVSwitch port bandwidth per direction"},
    {"cluster.fabric.node.nvswitch.efficiency", "flow network: the share of that bandwidth NCCL reaches"},
    {"cluster.fabric.node.nvswitch.latency_us", "flow network: latency of an NVSwitch hop"},
    {"cluster.fabric.node.nvlink.*", "flow network: the NVLink links of a node without NVSwitch (bandwidth per link, "
                                     "share reached, latency)"},
    {"cluster.fabric.node.pcie_switches", "flow network: PCIe switches per node (which GPUs share a NIC's switch)"},
    {"cluster.fabric.node.cpus", "flow network: CPUs per node (PCIe switches hang off them)"},
    {"cluster.fabric.node.pcie_GBps", "flow network: each PCIe link's bandwidth (GPU and NIC to their switch)"},
    {"cluster.fabric.node.pcie_latency_us", "flow network: latency of a PCIe hop"},
    {"cluster.fabric.node.cpu_link_GBps", "flow network: the CPU-to-CPU link"},
    {"cluster.fabric.network.link_GBps", "flow network: every NIC and switch link's bandwidth"},
    {"cluster.fabric.network.efficiency", "flow network: the share of that bandwidth reached"},
    {"cluster.fabric.network.hop_latency_us", "flow network: latency of a switch hop"},
    {"cluster.fabric.network.nodes_per_unit", "flow network: nodes of a scalable unit (one leaf per rail)"},
    {"cluster.fabric.network.units_per_pod", "flow network: scalable units per pod (above them, the core)"},
    {"cluster.fabric.network.switch_ports", "flow network: ports per switch (the spines' count)"},
    /* the device profile */
    {"profile.peak_tflops", "the dense 16-bit peak: MFU's denominator and the attention kernels' rate per SM; the "
                            "GEMMs' rate only where the profile gives gemm.efficiency_max (a fitted profile), not "
                            "where it gives a GEMM anchor (gemm.anchor.tflops is that rate)"},
    {"profile.peak_fp8_tflops", "the FP8 peak: FP8 MFU's denominator; FP8 GEMMs run at gemm_fp8.anchor.tflops where "
                                "given"},
    {"profile.sms", "SMs: GEMM and attention waves, and the share of the GPU a collective's SMs take"},
    {"profile.memory_GiB", "device memory: whether a configuration fits"},
    {"profile.hbm_GBps", "HBM bandwidth (times memory_efficiency): memory-bound kernels where no membound class gives "
                         "its own, GEMMs' memory bound, ZeRO's memory passes, the HBM a collective takes from the "
                         "compute beside it"},
    {"profile.memory_efficiency", "the share of hbm_GBps a streaming kernel reaches: the same uses as hbm_GBps"},
    {"profile.l2_MiB", "L2 size: which memory-bound kernels run at their L2 rate"},
    {"profile.kernel_launch_us", "the gap every kernel pays"},
    {"profile.sustained_clock_ratio", "the share of the boost-clock GEMM rate a long run sustains: every GEMM's and "
                                      "attention kernel's rate (--clock burst ignores it)"},
    {"profile.layer_forward_ns_per_token", "the ideal profile: a layer's forward time per token"},
    {"profile.gemm.anchor.tflops", "the 16-bit GEMM rate: the measured rate of the anchor shape, which sets every "
                                   "16-bit GEMM's efficiency (the key for a faster or slower GEMM)"},
    {"profile.gemm.anchor.*", "the anchor GEMM's shape (m, n, k), at which anchor.tflops was measured"},
    {"profile.gemm.efficiency_max", "the 16-bit GEMMs' best share of the peak (a fitted profile's GEMM rate)"},
    {"profile.gemm.k_half", "the K at which a 16-bit GEMM's rate has half its roll-off: short-K GEMMs' rate"},
    {"profile.gemm.tile_bandwidth_GBps", "the L2 bandwidth a 16-bit GEMM's resident tiles draw: small and skinny "
                                         "GEMMs' rate"},
    {"profile.gemm_fp8.anchor.tflops", "the FP8 GEMM rate: the measured rate of its anchor shape"},
    {"profile.gemm_fp8.anchor.*", "the FP8 anchor GEMM's shape (m, n, k)"},
    {"profile.gemm_fp8.efficiency_max", "the FP8 GEMMs' best share of the FP8 peak"},
    {"profile.gemm_fp8.k_half", "the K at which an FP8 GEMM's rate has half its roll-off"},
    {"profile.gemm_fp8.tile_bandwidth_GBps", "the L2 bandwidth an FP8 GEMM's resident tiles draw"},
    {"profile.gemm_fp8_split_accumulation", "the share of the FP8 rate the weight-gradient GEMMs reach (split "
                                            "accumulation)"},
    {"profile.attention.ctas_per_sm", "flash attention: thread blocks resident per SM"},
    {"profile.attention.flash_forward_efficiency", "flash attention forward: its share of the peak (older profiles)"},
    {"profile.attention.flash_backward_efficiency", "flash attention backward: its share of the peak (older "
                                                    "profiles)"},
    {"profile.attention.*.efficiency", "flash attention (this pass): a thread block's share of its SM's peak"},
    {"profile.attention.*.cta_overhead_us", "flash attention (this pass): each thread block's fixed cost"},
    {"profile.attention.*.tile_q", "flash attention (this pass): query rows per thread block"},
    {"profile.attention.*.tile_kv", "flash attention (this pass): key/value rows per step"},
    {"profile.membound.*.gap_us", "this class of memory-bound kernels (today's): the gap each pays"},
    {"profile.membound.*.hbm_GBps", "this class of memory-bound kernels (today's): their HBM rate"},
    {"profile.membound.*.l2_GBps", "this class of memory-bound kernels (today's): their rate when they fit in L2"},
    {"profile.membound_2021.*.*", "this class of the 2021 stack's memory-bound kernels (SC21 reproductions): its "
                                  "gap, HBM rate or L2 rate"},
    {"profile.power.rated_W", "the power model: the part's rated board power"},
    {"profile.power.idle_W", "the power model: the board's power at idle"},
    {"profile.power.exponent", "the power model: how power rises with the clock"},
    {"profile.power.boost_clock_MHz", "the power model: the boost clock"},
    {"profile.power.sustained_clock_MHz", "the power model: the clock settled at the rated power"},
    {"profile.overlap.sms_per_channel", "SMs a collective's channel holds from the compute beside it"},
    {"profile.overlap.hbm_bytes_per_byte", "HBM bytes a collective moves per byte it carries, taken from the "
                                           "memory-bound kernels beside it"},
};

/* Whether `key` matches `pattern`, component by component. */
static gboolean matches(const char *pattern, const char *key) {
  char **p = g_strsplit(pattern, ".", -1), **k = g_strsplit(key, ".", -1);
  guint np = g_strv_length(p), nk = g_strv_length(k);
  gboolean ok = np == nk;
  for (guint i = 0; ok && i < np; i++)
    ok = strcmp(p[i], "*") == 0 || strcmp(p[i], k[i]) == 0;
  g_strfreev(p);
  g_strfreev(k);
  return ok;
}

const char *search_set_key_doc(const char *key) {
  if (g_str_has_prefix(key, "profile.fit."))
    return "the fit's record (points, residuals, standard errors): read by nothing, moves nothing";
  for (guint i = 0; i < G_N_ELEMENTS(docs); i++)
    if (matches(docs[i].pattern, key))
      return docs[i].moves;
  return NULL;
}

static void list_numbers(GString *out, const cJSON *o, const char *path) {
  const cJSON *c;
  cJSON_ArrayForEach(c, o) {
    if (!c->string)
      continue;
    char *key = g_strconcat(path, ".", c->string, NULL);
    if (cJSON_IsObject(c))
      list_numbers(out, c, key);
    else if (cJSON_IsNumber(c)) {
      const char *doc = search_set_key_doc(key);
      GString *v = g_string_new(NULL);
      ptd_append_exact_number(v, c->valuedouble);
      g_string_append_printf(out, "  %s=%s\n      %s\n", key, v->str,
                             doc ? doc : "no line here: it changes what the file's reader reads (doc/inputs.md)");
      g_string_free(v, TRUE);
    }
    g_free(key);
  }
}

char *search_set_keys_list(const cJSON *cluster, const char *cluster_from, const cJSON *profile,
                           const char *profile_from) {
  GString *out = g_string_new(NULL);
  g_string_append_printf(out, "cluster %s (--set cluster.KEY=VALUES):\n", cluster_from);
  list_numbers(out, cluster, "cluster");
  g_string_append_printf(out, "profile %s (--set profile.KEY=VALUES):\n", profile_from);
  list_numbers(out, profile, "profile");
  return g_string_free(out, FALSE);
}
