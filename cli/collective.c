/* ptdsim collective — an nccl-tests-style table predicted on the cluster's
 * link graph: size, count, time (us), algbw and busbw (GB/s), per size from
 * --min-bytes to --max-bytes by --step-factor, with the algorithm and
 * protocol the tuner picked.  Columns and conventions are nccl-tests'
 * (doc/PERFORMANCE.md there): algbw = size / time; busbw = algbw * 2(n-1)/n
 * for all-reduce, (n-1)/n for all-gather and reduce-scatter (size = the whole
 * output / input buffer), 1 for sendrecv, (n-1)/n for alltoall (size = each
 * rank's send buffer, size/n to every rank). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/text.h"
#include "cli.h"
#include "../base/jsonutil.h"
#include "../base/ranges.h"
#include "../network/collective.h"

static gboolean parse_bytes(const char *text, const char *flag, double *out, GError **error) {
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(text, &end);
  double mult = 1;
  if (end && *end) {
    switch (g_ascii_toupper(*end)) {
    case 'K':
      mult = 1024.0;
      break;
    case 'M':
      mult = 1048576.0;
      break;
    case 'G':
      mult = 1073741824.0;
      break;
    default:
      mult = 0;
    }
    if (end[1] && !(g_ascii_toupper(end[1]) == 'B' && !end[2]) && !(g_ascii_toupper(end[1]) == 'I' && end[2] && g_ascii_toupper(end[2]) == 'B' && !end[3]))
      mult = 0;
  }
  /* decimal only: strtod would also read " 8", "+8" and hexadecimal "0x10" */
  if (!g_ascii_isdigit(text[0]) || strpbrk(text, "xX"))
    mult = 0;
  if (end == text || errno || mult == 0 || !(v >= 1) || v * mult > 1e13 || v * mult != floor(v * mult)) {
    char *echo = ptd_echo(text, PTD_ECHO_MAX, FALSE);
    g_set_error(error, NET_COLL_ERROR, 0, "%s '%s' is not a byte count; give a whole number from 1 to 1e13, "
                "optionally with K, M or G (1024-based), e.g. 8 or 1G", flag, echo);
    g_free(echo);
    return FALSE;
  }
  *out = v * mult;
  return TRUE;
}

/* The most rows a table may have. */
#define MAX_ROWS 10000u

/* The next row's size: size x factor, rounded down, and at least one byte more. */
static double next_size(double size, double factor) { return MAX(floor(size * factor), size + 1); }

int cli_collective(int argc, char **argv) {
  char *op_s = NULL, *cluster_s = NULL, *algo_s = NULL, *proto_s = NULL, *format_s = NULL, *routing_s = NULL;
  char *min_s = NULL, *max_s = NULL;
  /* whole numbers as given (NULL: not given), read strictly by cli_count */
  char *gpus_s = NULL, *per_node_s = NULL, *jobs_s = NULL, *stride_s = NULL, *first_s = NULL;
  guint gpus = 0, per_node = 0, jobs = 1, stride = 0, first = 0;
  double factor = 2;
  GOptionEntry entries[] = {
      {"op", 0, 0, G_OPTION_ARG_STRING, &op_s, "allreduce, allgather, reducescatter, sendrecv or alltoall", "OP"},
      {"gpus", 0, 0, G_OPTION_ARG_STRING, &gpus_s, "GPUs in the collective (per job)", "N"},
      {"min-bytes", 0, 0, G_OPTION_ARG_STRING, &min_s, "Smallest size (nccl-tests -b; default 8)", "BYTES"},
      {"max-bytes", 0, 0, G_OPTION_ARG_STRING, &max_s, "Largest size (nccl-tests -e; default 1G)", "BYTES"},
      {"step-factor", 0, 0, G_OPTION_ARG_DOUBLE, &factor, "Size multiplier between rows (nccl-tests -f; default 2)",
       "F"},
      {"cluster", 0, 0, G_OPTION_ARG_STRING, &cluster_s, "Cluster: " PTD_NAME_OR_PATH_HELP "; default selene",
       "NAME|FILE"},
      {"algorithm", 0, 0, G_OPTION_ARG_STRING, &algo_s,
       "Force ring, tree, hierarchical, nvls or nvls-tree (default auto: NCCL's tuner picks)", "ALGO"},
      {"protocol", 0, 0, G_OPTION_ARG_STRING, &proto_s, "Force LL, LL128 or Simple (default auto)", "PROTO"},
      {"gpus-per-node", 0, 0, G_OPTION_ARG_STRING, &per_node_s,
       "Use GPUs 0..K-1 of each node (default: every GPU of a node)", "K"},
      {"routing", 0, 0, G_OPTION_ARG_STRING, &routing_s,
       "ecmp (flow-hash path choice) or adaptive (spread over equal paths); default: the cluster's", "MODE"},
      {"jobs", 0, 0, G_OPTION_ARG_STRING, &jobs_s, "Run this many identical jobs at once, on disjoint nodes (default 1)",
       "J"},
      {"node-stride", 0, 0, G_OPTION_ARG_STRING, &stride_s,
       "Job j's a-th node is a*S+j (interleaves jobs across units); default 0: jobs on consecutive blocks", "S"},
      {"first-node", 0, 0, G_OPTION_ARG_STRING, &first_s, "First node used (default 0)", "NODE"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &format_s, "text or json (default text)", "FMT"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "- predict an nccl-tests table for one collective");
  g_option_context_set_summary(
      args.ctx, "Predicts what nccl-tests would print for one collective on the cluster's link graph: the flows of\n"
           "NCCL's ring / tree / hierarchical algorithms share links max-min fairly.\n\n"
           "Example:\n  ptdsim collective --op allreduce --gpus 16 --min-bytes 8 --max-bytes 1G --format json");
  cli_args_add(&args, entries);
  GError *error = NULL;
  int code = 0;
  TopoCluster *cluster = NULL;
  NetModel *net = NULL;
  CliFormat fmt;
  NetCollOp op = NET_OP_ALLREDUCE;
  NetCollAlgo algo = NET_ALGO_AUTO;
  int proto = -1;
  double min_b = 8, max_b = 1073741824.0;
  guint *ids = NULL;
  GPtrArray *plans = g_ptr_array_new_with_free_func((GDestroyNotify)net_coll_plan_free);
  cJSON *rows = NULL;
  GString *text = g_string_new(NULL);
  if (!cli_args_parse(&args, &argc, &argv, &error))
    goto fail;
#define BAD(...)                                                                                                       \
  do {                                                                                                                 \
    g_set_error(&error, NET_COLL_ERROR, 0, __VA_ARGS__);                                                               \
    goto fail;                                                                                                         \
  } while (0)
  if (argc > 1)
    BAD("unexpected argument '%s' (see ptdsim collective --help)", argv[1]);
  if (!cli_format(format_s, &fmt, &error))
    goto fail;
  static const char *ops[] = {"allreduce", "allgather", "reducescatter", "sendrecv", "alltoall"};
  if (!op_s)
    BAD("--op is required: allreduce, allgather, reducescatter, sendrecv or alltoall");
  guint oi = 0;
  while (oi < G_N_ELEMENTS(ops) && strcmp(op_s, ops[oi]))
    oi++;
  if (oi == G_N_ELEMENTS(ops))
    BAD("unknown --op '%s'; use allreduce, allgather, reducescatter, sendrecv or alltoall", op_s);
  op = (NetCollOp)oi;
  if (algo_s && !net_coll_algo_parse(algo_s, &algo))
    BAD("unknown --algorithm '%s'; use ring, tree, hierarchical, nvls, nvls-tree or auto", algo_s);
  if (proto_s && strcmp(proto_s, "auto") != 0) {
    for (int p = 0; p < TOPO_N_PROTOS; p++)
      if (strcmp(proto_s, topo_proto_name((TopoProto)p)) == 0)
        proto = p;
    if (proto < 0)
      BAD("unknown --protocol '%s'; use LL, LL128, Simple or auto", proto_s);
  }
  if ((op == NET_OP_SENDRECV || op == NET_OP_ALLTOALL) && (algo != NET_ALGO_AUTO || proto >= 0))
    BAD("%s is point-to-point: --algorithm and --protocol do not apply", op_s);
  if (!gpus_s)
    BAD("--gpus is required");
  if (!cli_count("--gpus", gpus_s, 2, 1048576, &gpus, &error) ||
      !cli_count_or("--jobs", jobs_s, 1, 1024, 1, &jobs, &error) ||
      !cli_count_or("--node-stride", stride_s, 0, PTD_MAX_CLUSTER_GPUS, 0, &stride, &error) ||
      !cli_count_or("--first-node", first_s, 0, PTD_MAX_CLUSTER_GPUS, 0, &first, &error) ||
      !cli_count_or("--gpus-per-node", per_node_s, 1, G_MAXINT32, 1, &per_node, &error))
    goto fail;
  if (!(factor > 1 && factor <= 1024))
    BAD("--step-factor must be above 1 (and at most 1024)");
  if ((min_s && !parse_bytes(min_s, "--min-bytes", &min_b, &error)) ||
      (max_s && !parse_bytes(max_s, "--max-bytes", &max_b, &error)))
    goto fail;
  if (!max_s && min_s && min_b > max_b)
    max_b = min_b;
  if (min_b > max_b)
    BAD("--min-bytes is larger than --max-bytes");
  /* Each row at least one byte larger than the last, so that the table
   * ends whatever the factor; and not so many rows that it never does. */
  guint n_rows = 0;
  for (double size = min_b; size <= max_b * (1 + 1e-12) && n_rows <= MAX_ROWS; size = next_size(size, factor))
    n_rows++;
  if (n_rows > MAX_ROWS)
    BAD("--step-factor %g from %.0f to %.0f bytes gives more than %u rows; give a larger factor or a narrower "
        "range", factor, min_b, max_b, MAX_ROWS);
  if (!(cluster = topo_cluster_load(cluster_s ? cluster_s : "selene", &error)) ||
      !(net = net_model_load(cluster, &error)))
    goto fail;
  TopoFabric *fab = net_model_fabric(net);
  if (routing_s) {
    if (strcmp(routing_s, "ecmp") == 0)
      topo_fabric_set_routing(fab, TOPO_ROUTING_ECMP);
    else if (strcmp(routing_s, "adaptive") == 0)
      topo_fabric_set_routing(fab, TOPO_ROUTING_ADAPTIVE);
    else
      BAD("unknown --routing '%s'; use ecmp or adaptive", routing_s);
  }
  guint G = cluster->gpus_per_node;
  guint K = per_node_s ? per_node : G;
  if (op == NET_OP_ALLTOALL && gpus > 512)
    BAD("--gpus %u is too many for alltoall, which runs a flow for every pair of GPUs; use at most 512", gpus);
  if (per_node_s && per_node > G)
    BAD("--gpus-per-node %u is out of range; cluster '%s' has %u GPUs per node", per_node, cluster->name, G);
  guint n = gpus, J = jobs;
  guint nodes_per_job = (n + K - 1) / K;
  if (n > K && n % K)
    BAD("--gpus %u does not fill whole nodes of --gpus-per-node %u; use a multiple of it", n, K);
  ids = g_new(guint, (gsize)n * J);
  for (guint j = 0; j < J; j++)
    for (guint q = 0; q < n; q++) {
      guint a = q / K;
      guint64 node = (guint64)first + (stride ? (guint64)a * stride + j : (guint64)j * nodes_per_job + a);
      if (node >= cluster->nodes)
        BAD("%u job(s) of %u GPUs (%u per node) need node %" G_GUINT64_FORMAT ", but cluster '%s' has %u nodes; use "
            "fewer GPUs or jobs, or a smaller --node-stride",
            J, n, K, node, cluster->name, cluster->nodes);
      if (stride && stride < J)
        BAD("--node-stride %u is smaller than --jobs %u, so jobs would share nodes; use a stride "
            "of at least %u",
            stride, J, J);
      ids[(gsize)j * n + q] = (guint)node * G + q % K;
    }

  double bus = op == NET_OP_ALLREDUCE ? 2.0 * (n - 1) / n : op == NET_OP_SENDRECV ? 1.0 : (double)(n - 1) / n;
  /* alltoall: each rank sends size / n to each rank */
  double align = (op == NET_OP_ALLGATHER || op == NET_OP_REDUCESCATTER || op == NET_OP_ALLTOALL) ? 4.0 * n : 4.0;
  rows = cJSON_CreateArray();
  /* The text is kept until every row is computed: an error prints nothing. */
  g_string_append_printf(text, "# ptdsim collective: %s on %u GPUs of %s (%u node%s x %u GPUs), %s routing; predicted\n",
                         op_s, n, cluster->name, nodes_per_job, nodes_per_job > 1 ? "s" : "", MIN(n, K),
                         topo_fabric_routing(fab) == TOPO_ROUTING_ECMP ? "ECMP" : "adaptive");
  if (J > 1)
    g_string_append_printf(text, "# %u such jobs run at once on disjoint nodes; the slowest job's time is shown\n", J);
  g_string_append_printf(text, "#\n# %10s %12s %6s %6s %10s %8s %8s  %-12s %s\n", "size", "count", "type", "redop",
                         "time", "algbw", "busbw", "algorithm", "protocol");
  g_string_append_printf(text, "# %10s %12s %6s %6s %10s %8s %8s\n", "(B)", "(elements)", "", "", "(us)", "(GB/s)",
                         "(GB/s)");
  double last_bytes = 0;
  for (double size = min_b; size <= max_b * (1 + 1e-12); size = next_size(size, factor)) {
    double bytes = floor(size / align) * align;
    if (bytes <= 0 || bytes == last_bytes) /* a size that aligns down to the last row's is that row */
      continue;
    last_bytes = bytes;
    g_ptr_array_set_size(plans, 0);
    for (guint j = 0; j < J; j++) {
      NetCollPlan *p = net_coll_plan(net, op, algo, proto, ids + (gsize)j * n, n, 1, bytes, j, &error);
      if (!p)
        goto fail;
      g_ptr_array_add(plans, p);
    }
    NetRun *run = net_run_new(net);
    for (guint j = 0; j < J; j++)
      net_run_start(run, g_ptr_array_index(plans, j), j, 0);
    GArray *done = g_array_new(FALSE, FALSE, sizeof(guint64));
    int64_t t, end = 0;
    while ((t = net_run_next(run)) >= 0) {
      net_run_advance(run, t, done);
      end = t;
    }
    g_array_free(done, TRUE);
    net_run_free(run);
    const NetCollPlan *p0 = g_ptr_array_index(plans, 0);
    double secs = (double)end * 1e-9;
    double algbw = secs > 0 ? bytes / secs / 1e9 : 0;
    const char *an = net_coll_algo_name(net_coll_plan_algo(p0)), *pn = topo_proto_name(net_coll_plan_proto(p0));
    double count = op == NET_OP_ALLGATHER || op == NET_OP_REDUCESCATTER || op == NET_OP_ALLTOALL ? bytes / 4 / n
                                                                                               : bytes / 4;
    g_string_append_printf(text, "  %10.0f %12.0f %6s %6s %10.2f %8.2f %8.2f  %-12s %s\n", bytes, count, "float",
             op == NET_OP_SENDRECV || op == NET_OP_ALLGATHER || op == NET_OP_ALLTOALL ? "none" : "sum", secs * 1e6, algbw, algbw * bus, an,
             pn);
    cJSON *row = cJSON_CreateObject();
    cJSON_AddNumberToObject(row, "bytes", bytes);
    cJSON_AddNumberToObject(row, "time_us", secs * 1e6);
    cJSON_AddNumberToObject(row, "algbw_GBps", algbw);
    cJSON_AddNumberToObject(row, "busbw_GBps", algbw * bus);
    cJSON_AddStringToObject(row, "algorithm", an);
    cJSON_AddStringToObject(row, "protocol", pn);
    cJSON_AddItemToArray(rows, row);
  }
  if (fmt == CLI_TEXT)
    fputs(text->str, stdout);
  else {
    cJSON *out = cJSON_CreateObject();
    cJSON_AddStringToObject(out, "op", op_s);
    cJSON_AddNumberToObject(out, "gpus", n);
    cJSON_AddNumberToObject(out, "nodes", nodes_per_job);
    cJSON_AddNumberToObject(out, "jobs", J);
    cJSON_AddStringToObject(out, "cluster", cluster->name);
    cJSON_AddStringToObject(out, "routing", topo_fabric_routing(fab) == TOPO_ROUTING_ECMP ? "ecmp" : "adaptive");
    cJSON_AddItemToObject(out, "rows", rows);
    rows = NULL;
    cli_print_json(out);
    cJSON_Delete(out);
  }
  goto done;
fail:
  code = cli_fail(error);
done:
  cJSON_Delete(rows);
  g_string_free(text, TRUE);
  g_ptr_array_free(plans, TRUE);
  g_free(ids);
  net_model_free(net);
  topo_cluster_free(cluster);
  g_free(op_s);
  g_free(cluster_s);
  g_free(algo_s);
  g_free(proto_s);
  g_free(format_s);
  g_free(routing_s);
  g_free(min_s);
  g_free(max_s);
  g_free(gpus_s);
  g_free(per_node_s);
  g_free(jobs_s);
  g_free(stride_s);
  g_free(first_s);
  cli_args_clear(&args);
  return code;
}
