/* ptdsim — options and helpers shared by the verbs (see cli.h). */
#include <stdio.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../base/units.h"
#include "cli.h"

#define NOT_GIVEN (-1)

void cli_run_options_init(CliRunOptions *o) {
  memset(o, 0, sizeof *o);
  gint64 *ints[] = {&o->layers, &o->hidden, &o->heads, &o->seq_len, &o->vocab, &o->gpus, &o->tp,
                    &o->pp, &o->dp, &o->global_batch, &o->micro_batch, &o->layers_per_chunk, &o->chunks, &o->granularity,
                    &o->zero};
  for (guint i = 0; i < G_N_ELEMENTS(ints); i++)
    *ints[i] = NOT_GIVEN;
}

void cli_run_options_clear(CliRunOptions *o) {
  char **strs[] = {&o->model, &o->cluster, &o->profile, &o->schedule, &o->ddp, &o->recompute,
                   &o->format, &o->slices, &o->network, &o->placement, &o->trace, &o->tokens, &o->workload};
  for (guint i = 0; i < G_N_ELEMENTS(strs); i++)
    g_clear_pointer(strs[i], g_free);
}

void cli_run_options_add(CliArgs *a, CliRunOptions *o) {
  GOptionEntry entries[] = {
      {"model", 0, 0, G_OPTION_ARG_STRING, &o->model, "Built-in model (gpt3-175b, megatron-1t, ...)", "NAME"},
      {"layers", 0, 0, G_OPTION_ARG_INT64, &o->layers, "Transformer layers l", "L"},
      {"hidden", 0, 0, G_OPTION_ARG_INT64, &o->hidden, "Hidden size h", "H"},
      {"heads", 0, 0, G_OPTION_ARG_INT64, &o->heads, "Attention heads a", "A"},
      {"seq-len", 0, 0, G_OPTION_ARG_INT64, &o->seq_len, "Sequence length s (default 2048)", "S"},
      {"vocab", 0, 0, G_OPTION_ARG_INT64, &o->vocab, "Vocabulary size V (default 51200)", "V"},
      {"cluster", 0, 0, G_OPTION_ARG_STRING, &o->cluster, "Cluster name or JSON file (default selene)", "NAME|FILE"},
      {"profile", 0, 0, G_OPTION_ARG_STRING, &o->profile,
       "Device profile name or JSON file (default: the cluster's GPU; 'ideal' for textbook timing)", "NAME|FILE"},
      {"gpus", 0, 0, G_OPTION_ARG_INT64, &o->gpus, "GPUs n", "N"},
      {"tp", 0, 0, G_OPTION_ARG_INT64, &o->tp, "Tensor-parallel size t", "T"},
      {"pp", 0, 0, G_OPTION_ARG_INT64, &o->pp, "Pipeline-parallel size p", "P"},
      {"dp", 0, 0, G_OPTION_ARG_INT64, &o->dp, "Data-parallel size d (default n/(t*p))", "D"},
      {"global-batch", 0, 0, G_OPTION_ARG_INT64, &o->global_batch, "Global batch B in sequences", "B"},
      {"micro-batch", 0, 0, G_OPTION_ARG_INT64, &o->micro_batch, "Microbatch size b", "b"},
      {"schedule", 0, 0, G_OPTION_ARG_STRING, &o->schedule,
       "gpipe, 1f1b, interleaved or terapipe (default 1f1b; interleaved when chunks are given)", "NAME"},
      {"slices", 0, 0, G_OPTION_ARG_STRING, &o->slices,
       "TeraPipe token slicing: auto (the DP, with batch slicing), uniform:N, or token counts 512,384,...",
       "SPEC"},
      {"granularity", 0, 0, G_OPTION_ARG_INT64, &o->granularity,
       "TeraPipe: slice lengths on multiples of this many tokens (default 8, as TeraPipe's code)", "G"},
      {"layers-per-chunk", 0, 0, G_OPTION_ARG_INT64, &o->layers_per_chunk,
       "Interleaved: layers per model chunk (Megatron's --num-layers-per-virtual-pipeline-stage)", "L"},
      {"chunks", 0, 0, G_OPTION_ARG_INT64, &o->chunks, "Interleaved: model chunks v per GPU", "V"},
      {"recompute", 0, 0, G_OPTION_ARG_STRING, &o->recompute, "Activation recomputation: full or none (default full)",
       "MODE"},
      {"no-scatter-gather", 0, 0, G_OPTION_ARG_NONE, &o->no_scatter_gather,
       "Send whole activations from every tensor-parallel rank instead of 1/t each plus an NVLink all-gather", NULL},
      {"no-fusion", 0, 0, G_OPTION_ARG_NONE, &o->no_fusion,
       "Unfused bias+GeLU, bias+dropout+add and scale+mask+softmax kernels", NULL},
      {"ddp", 0, 0, G_OPTION_ARG_STRING, &o->ddp,
       "Data-parallel gradient reduction: torch (overlapped with backward) or local (after the flush; default)",
       "IMPL"},
      {"tokens", 0, 0, G_OPTION_ARG_STRING, &o->tokens,
       "Training budget in tokens, for training_days (300e9, 300B, 1.2T)", "T"},
      {"no-symmetry", 0, 0, G_OPTION_ARG_NONE, &o->no_symmetry,
       "Simulate every GPU instead of one per tensor-parallel group and one replica (slow; a check)", NULL},
      {"allow-oom", 0, 0, G_OPTION_ARG_NONE, &o->allow_oom,
       "Simulate a configuration that does not fit in memory (reported as fits_in_memory: false)", NULL},
      {"format", 0, 0, G_OPTION_ARG_STRING, &o->format, "text or json (default text)", "FMT"},
      {"network", 0, 0, G_OPTION_ARG_STRING, &o->network,
       "flow (flows sharing the cluster graph's links; default where the cluster has a fabric, except TeraPipe) or analytic (alpha-beta per tier; fast)", "MODEL"},
      {"zero", 0, 0, G_OPTION_ARG_INT64, &o->zero,
       "ZeRO data parallelism instead of tensor and pipeline parallelism (DeepSpeed, as SC21 compares it): 1 shards "
       "the optimizer state, 2 also the gradients, 3 also the parameters; needs --tp 1 --pp 1",
       "STAGE"},
      {"workload", 0, 0, G_OPTION_ARG_STRING, &o->workload,
       "gpt (the whole training step; default) or layers (TeraPipe's benchmark: the transformer layers only, no "
       "embedding, logits or loss; --schedule terapipe)",
       "KIND"},
      {"placement", 0, 0, G_OPTION_ARG_STRING, &o->placement,
       "tp-dp-pp (Megatron's rank order; default), dp-outermost, or misaligned (TP groups straddle two nodes)",
       "ORDER"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  GOptionGroup *g = g_option_group_new("run", "Configuration options", "Show configuration options", NULL, NULL);
  cli_args_add_group(a, g, entries);
  g_option_context_set_main_group(a->ctx, g);
}

gboolean cli_tokens(const char *text, double *out, GError **error) {
  *out = 0;
  if (!text)
    return TRUE;
  if (!ptd_parse_count(text, out) || *out >= 1e18) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "--tokens '%s' is not a token count; give a positive number below 1e18, such as 300e9, 300B or 1.2T",
                text);
    return FALSE;
  }
  return TRUE;
}

static gboolean take(gint64 v, const char *flag, guint dflt, guint *out, GError **error) {
  if (v == NOT_GIVEN) {
    *out = dflt;
    return TRUE;
  }
  if (v < 1 || v > G_MAXINT32) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "%s %" G_GINT64_FORMAT
                " is out of range; give a whole number from 1 to %d", flag, v, G_MAXINT32);
    return FALSE;
  }
  *out = (guint)v;
  return TRUE;
}

gboolean cli_plan_request(const CliRunOptions *o, SimPlanRequest *r, GError **error) {
  memset(r, 0, sizeof *r);
  ModelShape named = {0, 0, 0, 2048, 51200};
  if (o->model && !model_lookup(o->model, &named)) {
    GString *names = g_string_new(NULL);
    for (const char *const *n = model_names(); *n; n++)
      g_string_append_printf(names, "%s%s", names->len ? ", " : "", *n);
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --model '%s'; built-in models: %s", o->model,
                names->str);
    g_string_free(names, TRUE);
    return FALSE;
  }
  if (!o->model && (o->layers == NOT_GIVEN || o->hidden == NOT_GIVEN || o->heads == NOT_GIVEN)) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "no model: give --model NAME or all of --layers, --hidden and --heads");
    return FALSE;
  }
  ModelShape *m = &r->model;
  if (!take(o->layers, "--layers", named.layers, &m->layers, error) ||
      !take(o->hidden, "--hidden", named.hidden, &m->hidden, error) ||
      !take(o->heads, "--heads", named.heads, &m->heads, error) ||
      !take(o->seq_len, "--seq-len", named.seq_len, &m->seq_len, error) ||
      !take(o->vocab, "--vocab", named.vocab, &m->vocab, error) || !take(o->gpus, "--gpus", 0, &r->gpus, error) ||
      !take(o->tp, "--tp", 1, &r->tp, error) || !take(o->pp, "--pp", 1, &r->pp, error) ||
      !take(o->dp, "--dp", 0, &r->dp, error) || !take(o->global_batch, "--global-batch", 0, &r->global_batch, error) ||
      !take(o->micro_batch, "--micro-batch", 1, &r->micro_batch, error) ||
      !take(o->layers_per_chunk, "--layers-per-chunk", 0, &r->layers_per_chunk, error) ||
      !take(o->chunks, "--chunks", 0, &r->chunks, error) ||
      !take(o->granularity, "--granularity", 0, &r->granularity, error) ||
      !take(o->zero, "--zero", 0, &r->zero, error))
    return FALSE;
  if (o->gpus == NOT_GIVEN) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--gpus is required");
    return FALSE;
  }
  if (o->global_batch == NOT_GIVEN) {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--global-batch is required");
    return FALSE;
  }
  if (!cli_tokens(o->tokens, &r->tokens, error))
    return FALSE;
  r->schedule = o->schedule;
  r->slices = o->slices;
  r->ddp = o->ddp;
  r->recompute = o->recompute;
  r->no_scatter_gather = o->no_scatter_gather;
  r->no_fusion = o->no_fusion;
  r->no_symmetry = o->no_symmetry;
  r->allow_oom = o->allow_oom;
  r->network = o->network;
  r->placement = o->placement;
  r->workload = o->workload;
  return TRUE;
}

gboolean cli_format(const char *text, CliFormat *out, GError **error) {
  if (!text || strcmp(text, "text") == 0)
    *out = CLI_TEXT;
  else if (strcmp(text, "json") == 0)
    *out = CLI_JSON;
  else {
    g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --format '%s'; use text or json", text);
    return FALSE;
  }
  return TRUE;
}

gboolean cli_load_machine(const char *cluster_name, const char *profile_name, TopoCluster **cluster,
                          ModelProfile **profile, GError **error) {
  *cluster = topo_cluster_load(cluster_name ? cluster_name : "selene", error);
  if (!*cluster)
    return FALSE;
  *profile = model_profile_load(profile_name ? profile_name : (*cluster)->gpu_profile, error);
  if (!*profile) {
    topo_cluster_free(*cluster);
    *cluster = NULL;
    return FALSE;
  }
  return TRUE;
}

void cli_print_json(cJSON *json) {
  ptd_json_exact_numbers(json); /* numbers read back as computed */
  char *text = cJSON_Print(json);
  fputs(text, stdout);
  fputc('\n', stdout);
  cJSON_free(text);
}

int cli_fail(GError *error) {
  fprintf(stderr, "ptdsim: %s\n", error->message);
  g_error_free(error);
  return 1;
}
