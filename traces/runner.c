/* ptdsim — one configuration, simulated or read back (see runner.h). */
#include "runner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/gzread.h"
#include "../base/jsonutil.h"
#include "../base/outfile.h"
#include "../sim/exposed.h"
#include "../terapipe/terapipe.h"
#include "../taskgraph/timeline.h"
#include "../zero/zero.h"
#include "perfetto.h"
#include "report.h"
#include "figures.h"
#include "../ptdp/ptdp.h"
#include "../plan/validate.h"
#include <errno.h>
#include <glib/gstdio.h>

G_DEFINE_QUARK(trace-runner-error-quark, trace_runner_error)

/* Traces above this size (uncompressed) are not read: far beyond the
 * writer's event limit (perfetto.h). */
#define MAX_TRACE_BYTES (2000000000ull)

static char *file_sha256(const char *path) {
  char *text = NULL;
  gsize len = 0;
  if (!path || !g_file_get_contents(path, &text, &len, NULL))
    return g_strdup("unknown");
  char *sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)text, len);
  g_free(text);
  return sum;
}

static void add_str(cJSON *o, const char *key, const char *v) {
  if (v)
    cJSON_AddStringToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static cJSON *source(const char *name, const char *path) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", name);
  char *sum = file_sha256(path);
  cJSON_AddStringToObject(o, "sha256", sum);
  g_free(sum);
  return o;
}

cJSON *trace_request_json(const SimPlanRequest *r, const TopoCluster *cluster, const ModelProfile *profile) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "ptdsim_version", PTDSIM_VERSION);
  cJSON *m = cJSON_AddObjectToObject(o, "model");
  cJSON_AddNumberToObject(m, "layers", r->model.layers);
  cJSON_AddNumberToObject(m, "hidden", r->model.hidden);
  cJSON_AddNumberToObject(m, "heads", r->model.heads);
  cJSON_AddNumberToObject(m, "seq_len", r->model.seq_len);
  cJSON_AddNumberToObject(m, "vocab", r->model.vocab);
  cJSON_AddItemToObject(o, "cluster", source(cluster->name, cluster->path));
  cJSON_AddItemToObject(o, "profile", source(profile->name, profile->path));
  const struct {
    const char *key;
    guint v;
  } counts[] = {{"gpus", r->gpus},
                {"tp", r->tp},
                {"pp", r->pp},
                {"dp", r->dp},
                {"global_batch", r->global_batch},
                {"micro_batch", r->micro_batch},
                {"layers_per_chunk", r->layers_per_chunk},
                {"chunks", r->chunks},
                {"granularity", r->granularity},
                {"zero", r->zero}};
  for (guint i = 0; i < G_N_ELEMENTS(counts); i++)
    cJSON_AddNumberToObject(o, counts[i].key, counts[i].v);
  /* the words as given (null: not given) */
  add_str(o, "schedule", r->schedule_given ? sim_schedule_name(r->schedule) : NULL);
  add_str(o, "ddp", r->ddp_given ? ptd_word_of(sim_ddp_words, (int)r->ddp) : NULL);
  add_str(o, "recompute", r->recompute_given ? ptd_word_of(sim_recompute_words, (int)r->recompute) : NULL);
  if (r->recompute_every) /* the policies' parameters, where given */
    cJSON_AddNumberToObject(o, "recompute_every", r->recompute_every);
  if (r->recompute_modules_given)
    cJSON_AddNumberToObject(o, "recompute_modules_bits", r->recompute_modules);
  char *slices = sim_slices_text(r);
  add_str(o, "slices", slices);
  g_free(slices);
  add_str(o, "network", r->network_given ? ptd_word_of(sim_network_words, (int)r->network) : NULL);
  add_str(o, "placement", r->placement_given ? ptd_word_of(sim_placement_words, (int)r->placement) : NULL);
  add_str(o, "workload", r->workload_given ? ptd_word_of(sim_workload_words, (int)r->workload) : NULL);
  cJSON_AddBoolToObject(o, "no_scatter_gather", r->no_scatter_gather);
  cJSON_AddBoolToObject(o, "no_fusion", r->no_fusion);
  cJSON_AddBoolToObject(o, "no_symmetry", r->no_symmetry);
  cJSON_AddBoolToObject(o, "allow_oom", r->allow_oom);
  cJSON_AddBoolToObject(o, "exact", r->exact);
  cJSON_AddNumberToObject(o, "tokens", r->tokens);
  if (r->power_limit_given) /* the GPUs' power cap, where given */
    cJSON_AddNumberToObject(o, "power_limit_W", r->power_limit_W);
  /* an uneven pipeline split, where one is asked for */
  if (r->split.first)
    cJSON_AddNumberToObject(o, "first_stage_layers", r->split.first);
  if (r->split.last)
    cJSON_AddNumberToObject(o, "last_stage_layers", r->split.last);
  if (r->split.embedding)
    cJSON_AddBoolToObject(o, "account_for_embedding", TRUE);
  if (r->split.loss)
    cJSON_AddBoolToObject(o, "account_for_loss", TRUE);
  if (r->layout)
    cJSON_AddStringToObject(o, "pipeline_model_parallel_layout", r->layout);
  /* a schedule study's times and a schedule of one's own, where given */
  if (r->stage_times && r->stage_times_text)
    cJSON_AddStringToObject(o, "stage_times", r->stage_times_text);
  else if (r->stage_times) {
    const double *t = r->stage_times_ms;
    char *text = g_strdup_printf("%.17g,%.17g,%.17g,%.17g", t[0], t[1], t[2], t[3]);
    cJSON_AddStringToObject(o, "stage_times", text);
    g_free(text);
  }
  if (r->schedule_file)
    cJSON_AddItemToObject(o, "schedule_file", source(r->schedule_file, r->schedule_file));
  return o;
}

/* TeraPipe's part of the run JSON: the slicing and its pipeline figures. */
static void add_terapipe(cJSON *json, const SimPlan *plan, const SimResult *r, const SimTeraPipeSlicing *sl) {
  cJSON *tp = cJSON_AddObjectToObject(json, "terapipe");
  cJSON_AddNumberToObject(tp, "idle_fraction", r->idle_fraction);
  cJSON_AddNumberToObject(tp, "analytic_idle_fraction", (plan->pp - 1.0) / ((double)r->token_slices + plan->pp - 1.0));
  cJSON_AddNumberToObject(tp, "token_slices_in_pipeline", r->token_slices);
  cJSON_AddNumberToObject(tp, "granularity", plan->granularity);
  sim_terapipe_slicing_json(sl, tp);
}

cJSON *trace_run(const SimPlanRequest *req, const TopoCluster *cluster, const ModelProfile *profile,
                 const char *trace_path, guint64 max_events, GError **error) {
  return trace_run_full(req, NULL, cluster, profile, trace_path, max_events, error);
}

/* Stragglers: the slowest GPU, and what they cost -- the same plan run
 * again without them. */
static gboolean add_stragglers(cJSON *json, const SimPlan *plan, const SimResult *res, const ModelProfile *profile,
                               const TopoCluster *cluster, GError **error) {
  SimPlan *clean = g_new(SimPlan, 1);
  *clean = *plan;
  memset(&clean->stragglers, 0, sizeof clean->stragglers);
  SimResult base;
  gboolean ok = sim_ptdp_run(clean, profile, cluster, &base, error);
  g_free(clean);
  if (!ok)
    return FALSE;
  guint gpn = cluster->gpus_per_host, slowest = 0;
  double speed = 2;
  for (guint g = 0; g < plan->gpus; g++) {
    double f = sim_plan_gpu_speed(plan, g, sim_plan_stage_of_gpu(plan, g, gpn), gpn);
    if (f < speed)
      speed = f, slowest = g;
  }
  cJSON *o = cJSON_AddObjectToObject(json, "stragglers");
  cJSON_AddNumberToObject(o, "slowest_gpu", slowest);
  cJSON_AddNumberToObject(o, "slowest_gpu_speed", speed);
  cJSON_AddNumberToObject(o, "slowest_gpu_stage", sim_plan_stage_of_gpu(plan, slowest, gpn));
  cJSON_AddNumberToObject(o, "slowest_gpu_node", slowest / gpn);
  double link = 1;
  for (guint i = 0; i < plan->stragglers.n_link; i++)
    link = MIN(link, plan->stragglers.link[i].factor);
  cJSON_AddNumberToObject(o, "slowest_link_factor", link);
  cJSON_AddNumberToObject(o, "critical_stage", res->critical_stage);
  cJSON_AddNumberToObject(o, "iteration_time_s_without", base.iteration_time_s);
  cJSON_AddNumberToObject(o, "cost_s", MAX(0.0, res->iteration_time_s - base.iteration_time_s));
  cJSON_AddNumberToObject(o, "cost_fraction", MAX(0.0, res->iteration_time_s / base.iteration_time_s - 1));
  return TRUE;
}

/* The whole run of a finished iteration (runtime/runtime.h). */
static gboolean add_whole_run(cJSON *json, const RtOptions *o, const SimPlan *plan, const SimResult *res,
                              const TopoCluster *cluster, GError **error) {
  RtInput in = {.iteration_s = res->iteration_time_s,
                .tokens_per_iteration = (double)plan->global_batch * plan->model.seq_len,
                .tokens = plan->tokens,
                .gpus = plan->gpus,
                .gpus_per_node = cluster->gpus_per_host};
  rt_checkpoint_bytes(plan, res, &in.checkpoint_bytes, &in.rank_bytes);
  RtResult r;
  if (!rt_run(&in, o, &r, error))
    return FALSE;
  cJSON *w = trace_whole_run_json(o, &r);
  if (plan->price_per_gpu_hour > 0) /* the expected GPU-hours, failures and checkpoints included, at the price */
    cJSON_AddNumberToObject(cJSON_GetObjectItemCaseSensitive(w, "expected"), "cost",
                            r.gpu_hours * plan->price_per_gpu_hour);
  cJSON_AddItemToObject(json, "whole_run", w);
  return TRUE;
}

/* What each effect of the step costs (--framework, --host-op-us, the
 * profile's sustained clock, the cluster's collective_channels): the
 * iteration time less the time of the same plan without that effect alone,
 * each removed on its own: the clock at boost, every memory-bound kernel
 * free (the framework's own kernels: everything but the GEMMs and
 * attention), the host launching for free, compute beside collectives at
 * full speed.
 * PTD-P and the sharded strategies; TeraPipe prices its slices its own way. */
static gboolean add_step_effects(cJSON *json, const SimPlan *plan, const ModelProfile *profile,
                                 const TopoCluster *cluster, const SimResult *res, GError **error) {
  if (plan->schedule == SIM_SCHEDULE_TERAPIPE)
    return TRUE;
  enum { CLOCK, MEMBOUND, HOST, CONTENTION, N_EFFECTS };
  static const char *const names[N_EFFECTS] = {"clock", "framework_kernels", "host_launch", "contention"};
  SimPlan *alt = g_new(SimPlan, 1);
  cJSON *o = cJSON_CreateObject();
  gboolean ok = TRUE;
  ModelProfile boost = *profile; /* the clock's counterfactual: GEMMs at the boost clock */
  boost.sustained_clock_ratio = 1;
  for (guint e = 0; ok && e < N_EFFECTS; e++) {
    *alt = *plan;
    if ((e == CLOCK && profile->sustained_clock_ratio >= 1) || (e == HOST && plan->host_op_s <= 0) ||
        (e == CONTENTION && !(res->contention > 1))) {
      cJSON_AddNumberToObject(o, names[e], 0);
      continue;
    }
    alt->free_membound = e == MEMBOUND;
    alt->host_op_s = e == HOST ? 0 : plan->host_op_s;
    alt->no_contention = e == CONTENTION;
    alt->allow_oom = TRUE; /* the same memory: only the time differs */
    SimResult without;
    const ModelProfile *p = e == CLOCK ? &boost : profile;
    ok = plan->zero ? sim_zero_run(alt, p, cluster, &without, NULL, NULL, error)
                    : sim_ptdp_run_observed(alt, p, cluster, &without, NULL, NULL, error);
    if (ok)
      cJSON_AddNumberToObject(o, names[e], res->iteration_time_s - without.iteration_time_s);
  }
  g_free(alt);
  if (!ok) {
    cJSON_Delete(o);
    return FALSE;
  }
  cJSON_AddItemToObject(json, "step_effects_s", o);
  return TRUE;
}

cJSON *trace_run_full(const SimPlanRequest *req, const RtOptions *rt, const TopoCluster *cluster,
                      const ModelProfile *profile, const char *trace_path, guint64 max_events, GError **error) {
  SimPlanRequest r = *req;
  if (!r.network_given && profile->n_coll > 0) {
    /* measured collectives drive the analytic model; the flow network cannot use them yet */
    r.network = SIM_NETWORK_ANALYTIC;
    r.network_given = TRUE;
  }
  SimPlan *plan = g_new(SimPlan, 1); /* large: TeraPipe's slice table */
  TracePerfetto *trace = NULL;
  SimTeraPipeSlicing sl = {0};
  cJSON *json = NULL;
  SimResult res;
  gboolean ok = sim_plan_build(&r, cluster, plan, error);
  /* the GEMMs' clock: at the boost clock (--clock burst) or where the
   * GPUs' power cap holds it (--power-limit, the cluster's cap) */
  ModelProfile clocked;
  const ModelProfile *run_profile = ok ? sim_request_clock_profile(&r, cluster, profile, &clocked, error) : NULL;
  ok = ok && run_profile;
  if (ok)
    profile = run_profile;
  /* The trace's place is checked (a temporary file made there) before anything is simulated. */
  const char *inputs[] = {cluster->path, profile->path, r.schedule_file, NULL}; /* never written over */
  if (ok && trace_path)
    ok = (trace = trace_perfetto_open(trace_path, inputs, error)) != NULL;
  if (trace && max_events)
    trace_perfetto_set_max_events(trace, max_events);
  SimTimelineFn observe = trace ? trace_perfetto_write : NULL;
  if (ok) {
    if (plan->schedule == SIM_SCHEDULE_TERAPIPE)
      ok = sim_terapipe_choose(plan, profile, cluster, &sl, error) &&
           sim_terapipe_simulate_observed(plan, profile, cluster, &sl, &res, observe, trace, error);
    else if (plan->zero)
      ok = sim_zero_run(plan, profile, cluster, &res, observe, trace, error);
    else
      ok = sim_ptdp_run_observed(plan, profile, cluster, &res, observe, trace, error);
    /* past the clock with stragglers: they stretched it (a factor of
     * 1e-300), not the profile or the cluster the engine would blame */
    if (!ok && error && g_error_matches(*error, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_TOO_LONG) &&
        sim_plan_has_stragglers(plan)) {
      g_clear_error(error);
      g_set_error(error, SIM_ENGINE_ERROR, SIM_ENGINE_ERROR_TOO_LONG,
                  "with its stragglers the simulated iteration lasts longer than %g s, the longest time ptdsim "
                  "represents: a GPU or NIC slowed to F (--slow, --gpu-speed, --slow-link) takes 1/F as long; give "
                  "larger factors",
                  SIM_TIME_MAX_S);
    }
  }
  if (ok) {
    json = trace_result_json(plan, profile, cluster, &res);
    if (plan->schedule == SIM_SCHEDULE_TERAPIPE)
      add_terapipe(json, plan, &res, &sl);
    if (sim_plan_has_stragglers(plan))
      ok = add_stragglers(json, plan, &res, profile, cluster, error);
    if (ok && rt && plan->tokens > 0)
      ok = add_whole_run(json, rt, plan, &res, cluster, error);
    if (ok && r.step_effects)
      ok = add_step_effects(json, plan, profile, cluster, &res, error);
    ok = ok && trace_run_json_check(json, error);
  }
  if (ok && trace) {
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddStringToObject(meta, "format", "ptdsim-trace");
    cJSON_AddItemToObject(meta, "request", trace_request_json(req, cluster, profile));
    cJSON_AddItemToObject(meta, "result", cJSON_Duplicate(json, TRUE));
    ptd_json_exact_numbers(meta);
    ok = trace_perfetto_commit(trace, meta, error);
    cJSON_Delete(meta);
  }
  if (!ok && json) {
    cJSON_Delete(json);
    json = NULL;
  }
  trace_perfetto_free(trace);
  sim_terapipe_slicing_clear(&sl);
  g_free(plan);
  return json;
}

/* --- reading --- */

/* The file, plain or gzip (base/gzread.c), with its errors naming it. */
static gboolean read_all(const char *path, GByteArray *out, GError **error) {
  GError *local = NULL;
  if (ptd_read_json_text(path, MAX_TRACE_BYTES, "a trace", "it is not one ptdsim writes", out, NULL, &local))
    return TRUE;
  g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_READ, "cannot read trace '%s': %s", path, local->message);
  g_error_free(local);
  return FALSE;
}

static gboolean bad(GError **error, const char *path, const char *what) {
  g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT, "trace '%s': %s", path, what);
  return FALSE;
}

/* Nanoseconds of a "ts" or "dur" member (microseconds, exact to the ns). */
/* -1 unless a number from 0 to the longest time simulated (sim/engine.h). */
static gint64 ns_of(const cJSON *v) {
  return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= SIM_TIME_MAX_S * 1e6
             ? (gint64)llround(v->valuedouble * 1000.0)
             : -1;
}

/* A whole number from 0 to G_MAXINT32 - 1, or -1. */
static gint whole_of(double v) { return v >= 0 && v < G_MAXINT32 && v == floor(v) ? (gint)v : -1; }

static guint class_of(const char *cat) {
  static const struct {
    const char *name;
    guint category;
  } cats[] = {{"compute", SIM_CAT_COMPUTE}, {"tp", SIM_CAT_TP},
              {"pp", SIM_CAT_PP},           {"dp", SIM_CAT_DP},
              {"optimizer", SIM_CAT_OPTIMIZER}, {"cp", SIM_CAT_CP}};
  for (guint i = 0; i < G_N_ELEMENTS(cats); i++)
    if (strcmp(cat, cats[i].name) == 0)
      return sim_exposed_class(cats[i].category);
  return G_MAXUINT;
}

static double num_at(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* What the events say, gathered one event at a time: each GPU's busy
 * intervals by class, the GPU of each stage's first tensor rank in replica
 * 0 (from the process names), the latest end. */
typedef struct {
  GHashTable *edges;    /* pid -> GArray of exposed.h edges */
  GHashTable *stage_of; /* stage -> pid, as GINT_TO_POINTER(pid + 1) */
  gint64 end;
  guint64 n_x;
  cJSON *keep; /* the events themselves, when asked for */
  char *what;  /* "trace 'PATH': an event", for errors */
} Scan;

static gboolean scan_event(Scan *sc, cJSON *e, const char *path, GError **error) {
  const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph"), *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
  if (!cJSON_IsString(ph) || !cJSON_IsNumber(pid) || whole_of(pid->valuedouble) < 0)
    return bad(error, path, "an event lacks ph or pid (a whole number)");
  if (strcmp(ph->valuestring, "M") == 0) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
    unsigned g, st, i, k;
    if (cJSON_IsString(name) && strcmp(name->valuestring, "process_name") == 0 && cJSON_IsString(label) &&
        sscanf(label->valuestring, "GPU %u (stage %u, tp %u, replica %u", &g, &st, &i, &k) == 4 && i == 0 && k == 0)
      g_hash_table_insert(sc->stage_of, GUINT_TO_POINTER(st), GINT_TO_POINTER(whole_of(pid->valuedouble) + 1));
    return TRUE;
  }
  if (strcmp(ph->valuestring, "X") != 0)
    return TRUE;
  gint64 ts = ns_of(cJSON_GetObjectItemCaseSensitive(e, "ts")), dur = ns_of(cJSON_GetObjectItemCaseSensitive(e, "dur"));
  const cJSON *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
  if (ts < 0 || dur < 0 || !cJSON_IsString(cat))
    return bad(error, path, "an event lacks ts, dur or cat");
  sc->end = MAX(sc->end, ts + dur);
  sc->n_x++;
  guint cls = class_of(cat->valuestring);
  if (cls == G_MAXUINT)
    return TRUE;
  gpointer key = GINT_TO_POINTER(whole_of(pid->valuedouble));
  GArray *edges = g_hash_table_lookup(sc->edges, key);
  if (!edges)
    g_hash_table_insert(sc->edges, key, edges = sim_exposed_edges_new());
  sim_exposed_add(edges, ts, ts + dur, cls);
  return TRUE;
}

/* The iteration time and the critical GPU's breakdown, recomputed from the
 * events and compared with the stored result: they must be the same to the
 * nanosecond (the same integer sweep as the simulator's). */
static gboolean verify(const char *path, Scan *sc, const cJSON *result, GError **error) {
  double crit = num_at(result, "critical_stage"), stored_s = num_at(result, "iteration_time_s");
  const cJSON *tb = cJSON_GetObjectItemCaseSensitive(result, "time_breakdown_s");
  if (whole_of(crit) < 0 || !(stored_s >= 0 && stored_s <= SIM_TIME_MAX_S) || !cJSON_IsObject(tb))
    return bad(error, path, "its ptdsim metadata has no result (iteration_time_s, critical_stage, time_breakdown_s)");
  if (sc->n_x == 0)
    return bad(error, path, "it has no events");
  gint pid1 = GPOINTER_TO_INT(g_hash_table_lookup(sc->stage_of, GUINT_TO_POINTER((guint)whole_of(crit))));
  if (pid1 == 0)
    return bad(error, path, "no process of its events is the critical stage's GPU");
  GArray *edges = g_hash_table_lookup(sc->edges, GINT_TO_POINTER(pid1 - 1));
  GArray *none = edges ? NULL : sim_exposed_edges_new();
  double parts[SIM_N_CLS + 1];
  sim_exposed_split(edges ? edges : none, sc->end, parts);
  if (none)
    g_array_free(none, TRUE);
  gint64 stored = (gint64)llround(stored_s * 1e9);
  if (sc->end != stored) {
    g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_MISMATCH,
                "trace '%s': its events end at %.9f s but its metadata says iteration_time_s %.9f s; the file was "
                "altered or mixed with another",
                path, sc->end * 1e-9, stored_s);
    return FALSE;
  }
  static const char *keys[] = {"compute", "tp_comm", "pp_comm", "dp_comm", "optimizer", "bubble"};
  const double got[] = {parts[SIM_CLS_COMPUTE], parts[SIM_CLS_TP],  parts[SIM_CLS_PP],
                        parts[SIM_CLS_DP],      parts[SIM_CLS_OPT], parts[SIM_N_CLS]};
  for (guint i = 0; i < G_N_ELEMENTS(keys); i++)
    if (!(fabs(num_at(tb, keys[i])) <= SIM_TIME_MAX_S) || llround(got[i] * 1e9) != llround(num_at(tb, keys[i]) * 1e9)) {
      g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_MISMATCH,
                  "trace '%s': its events give time_breakdown_s.%s %.9f s but its metadata says %.9f s; the file was "
                  "altered or mixed with another",
                  path, keys[i], got[i], num_at(tb, keys[i]));
      return FALSE;
    }
  return TRUE;
}

/* --- a scan of the JSON text: the top-level object member by member and
 * the events one by one, each parsed by cJSON on its own, so that reading
 * a trace takes memory for one event, not for a tree of millions --- */

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
    p++;
  return p;
}

/* Past the string starting at p (on its '"'); NULL if unterminated. */
static const char *skip_string(const char *p, const char *end) {
  for (p++; p < end; p++) {
    if (*p == '\\')
      p++;
    else if (*p == '"')
      return p + 1;
  }
  return NULL;
}

/* Past the JSON value starting at p: a string, an object or array (its
 * brackets matched, strings inside skipped), or a scalar.  NULL if it runs
 * off the end.  cJSON checks the value itself when it is parsed. */
static const char *skip_value(const char *p, const char *end) {
  if (p >= end)
    return NULL;
  if (*p == '"')
    return skip_string(p, end);
  if (*p != '{' && *p != '[') {
    while (p < end && !strchr(",}] \t\r\n", *p))
      p++;
    return p < end ? p : NULL;
  }
  guint depth = 0;
  for (; p < end; p++) {
    if (*p == '"') {
      if (!(p = skip_string(p, end)))
        return NULL;
      p--;
    } else if (*p == '{' || *p == '[')
      depth++;
    else if ((*p == '}' || *p == ']') && --depth == 0)
      return p + 1;
  }
  return NULL;
}

static gboolean truncated(GError **error, const char *path, const char *text, const char *at) {
  g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT,
              "trace '%s' is not valid JSON (near byte %zu): truncated, or not a trace", path, (gsize)(at - text));
  return FALSE;
}

/* Scans the "traceEvents" array at p; *after is past it. */
static gboolean scan_events(Scan *sc, const char *text, const char *p, const char *end, const char **after,
                            const char *path, GError **error) {
  if (p >= end) /* the text ends after "traceEvents": */
    return truncated(error, path, text, p);
  if (*p != '[')
    return bad(error, path, "its traceEvents is not a list");
  p = skip_ws(p + 1, end);
  if (p < end && *p == ']') {
    *after = p + 1;
    return TRUE;
  }
  for (;;) {
    const char *v_end = skip_value(p, end);
    if (!v_end)
      return truncated(error, path, text, p);
    cJSON *e = cJSON_ParseWithLength(p, (size_t)(v_end - p));
    if (!cJSON_IsObject(e)) {
      cJSON_Delete(e);
      return truncated(error, path, text, p);
    }
    gboolean ok = ptd_json_unique_keys(e, sc->what, NULL, error) && scan_event(sc, e, path, error);
    if (ok && sc->keep)
      cJSON_AddItemToArray(sc->keep, e);
    else
      cJSON_Delete(e);
    if (!ok)
      return FALSE;
    p = skip_ws(v_end, end);
    if (p < end && *p == ']') {
      *after = p + 1;
      return TRUE;
    }
    if (p >= end || *p != ',')
      return truncated(error, path, text, p);
    p = skip_ws(p + 1, end);
  }
}

/* Scans the whole text: events into `sc`, the "ptdsim" member into *meta. */
static gboolean scan(Scan *sc, const char *text, gsize len, cJSON **meta, const char *path, GError **error) {
  const char *p = skip_ws(text, text + len), *end = text + len;
  gboolean events_seen = FALSE;
  if (p >= end || *p != '{')
    return truncated(error, path, text, p);
  p = skip_ws(p + 1, end);
  while (p < end && *p != '}') {
    const char *k_end = *p == '"' ? skip_string(p, end) : NULL;
    if (!k_end)
      return truncated(error, path, text, p);
    gsize k_len = (gsize)(k_end - p - 2);
    const char *key = p + 1;
    p = skip_ws(k_end, end);
    if (p >= end || *p != ':')
      return truncated(error, path, text, p);
    p = skip_ws(p + 1, end);
    const char *v_end;
    if (k_len == 11 && memcmp(key, "traceEvents", 11) == 0) {
      if (events_seen)
        return bad(error, path, "key 'traceEvents' is given twice; keep one");
      if (!scan_events(sc, text, p, end, &v_end, path, error))
        return FALSE;
      events_seen = TRUE;
    } else {
      if (!(v_end = skip_value(p, end)))
        return truncated(error, path, text, p);
      if (k_len == 6 && memcmp(key, "ptdsim", 6) == 0) {
        if (*meta)
          return bad(error, path, "key 'ptdsim' is given twice; keep one");
        if (!(*meta = cJSON_ParseWithLength(p, (size_t)(v_end - p))))
          return truncated(error, path, text, p);
        char *what = g_strdup_printf("trace '%s'", path);
        gboolean unique = ptd_json_unique_keys(*meta, what, "ptdsim", error);
        g_free(what);
        if (!unique)
          return FALSE;
      }
    }
    p = skip_ws(v_end, end);
    if (p < end && *p == ',')
      p = skip_ws(p + 1, end);
    else if (p >= end || *p != '}')
      return truncated(error, path, text, p);
  }
  if (p >= end || skip_ws(p + 1, end) != end)
    return truncated(error, path, text, p < end ? p + 1 : p);
  const cJSON *format = cJSON_GetObjectItemCaseSensitive(*meta, "format");
  if (!cJSON_IsObject(*meta) || !cJSON_IsString(format) || strcmp(format->valuestring, "ptdsim-trace") != 0)
    return bad(error, path, "not a ptdsim trace (no \"ptdsim\" metadata); write one with ptdsim run --trace or "
                            "ptdsim figure --save-traces");
  if (!events_seen)
    return bad(error, path, "it has no traceEvents list");
  if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(*meta, "request")) ||
      !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(*meta, "result")))
    return bad(error, path, "its ptdsim metadata lacks the request or the result");
  return TRUE;
}

/* The result holds every key its report reads, each a finite number of
 * zero or more where it is a number (trace_report_check). */
static gboolean complete(const char *path, const cJSON *result, GError **error) {
  GError *local = NULL;
  if (trace_report_check(result, &local))
    return TRUE;
  g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT, "trace '%s': %s", path, local->message);
  g_error_free(local);
  return FALSE;
}

cJSON *trace_read(const char *path, cJSON **request, cJSON **events_out, GError **error) {
  if (request)
    *request = NULL;
  if (events_out)
    *events_out = NULL;
  GByteArray *bytes = g_byte_array_new();
  if (!read_all(path, bytes, error)) {
    g_byte_array_free(bytes, TRUE);
    return NULL;
  }
  Scan sc = {g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref),
             g_hash_table_new(g_direct_hash, g_direct_equal), 0, 0, events_out ? cJSON_CreateArray() : NULL,
             g_strdup_printf("trace '%s': an event", path)};
  cJSON *meta = NULL, *result = NULL;
  /* an empty file has no data pointer at all: scan an empty string */
  const char *text = bytes->len ? (const char *)bytes->data : "";
  const char *bad_utf8 = NULL;
  gsize deep_at = 0;
  gboolean ok = TRUE;
  if (!g_utf8_validate(text, (gssize)bytes->len, &bad_utf8)) {
    g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT,
                "trace '%s': invalid UTF-8 at byte %zu; JSON text is UTF-8, and ptdsim writes nothing else", path,
                (gsize)(bad_utf8 - text));
    ok = FALSE;
  } else if (!ptd_json_depth_ok(text, bytes->len, PTD_JSON_MAX_DEPTH, &deep_at)) {
    g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT,
                "trace '%s': nested more than %u levels deep at byte %zu; no trace is", path, PTD_JSON_MAX_DEPTH,
                deep_at);
    ok = FALSE;
  }
  if (ok && scan(&sc, text, bytes->len, &meta, path, error) &&
      verify(path, &sc, cJSON_GetObjectItemCaseSensitive(meta, "result"), error) &&
      complete(path, cJSON_GetObjectItemCaseSensitive(meta, "result"), error)) {
    result = cJSON_DetachItemFromObjectCaseSensitive(meta, "result");
    if (request)
      *request = cJSON_DetachItemFromObjectCaseSensitive(meta, "request");
    if (events_out) {
      *events_out = sc.keep;
      sc.keep = NULL;
    }
  }
  g_byte_array_free(bytes, TRUE);
  cJSON_Delete(meta);
  cJSON_Delete(sc.keep);
  g_hash_table_destroy(sc.edges);
  g_hash_table_destroy(sc.stage_of);
  g_free(sc.what);
  return result;
}

/* --- a figure's configurations --- */

char *trace_figure_trace_path(const TraceFigureContext *ctx, guint k) {
  char *file = g_strdup_printf("%s.%04u.json.gz", ctx->name, k);
  char *path = g_build_filename(ctx->trace_dir, file, NULL);
  g_free(file);
  return path;
}

/* The first place where two requests differ, as "KEY: A here, B in the
 * trace" (for the mismatch message). */
static char *first_difference(const cJSON *want, const cJSON *got) {
  const cJSON *w;
  cJSON_ArrayForEach(w, want) {
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(got, w->string);
    if (g && cJSON_Compare(w, g, TRUE))
      continue;
    if (cJSON_IsObject(w) && cJSON_IsObject(g)) {
      char *inner = first_difference(w, g);
      char *out = g_strdup_printf("%s.%s", w->string, inner);
      g_free(inner);
      return out;
    }
    char *a = cJSON_PrintUnformatted(w), *b = g ? cJSON_PrintUnformatted(g) : g_strdup("nothing");
    char *out = g_strdup_printf("%s: %s for this figure, %s in the trace", w->string, a, b);
    cJSON_free(a);
    if (g)
      cJSON_free(b);
    else
      g_free(b);
    return out;
  }
  return g_strdup("a field the figure does not set");
}

static cJSON *figure_read(TraceFigureContext *ctx, const SimPlanRequest *req, const char *path, cJSON **events,
                          GError **error) {
  cJSON *stored = NULL;
  cJSON *run = trace_read(path, &stored, events, error);
  if (!run)
    return NULL;
  cJSON *want = trace_request_json(req, ctx->cluster, ctx->profile);
  if (!cJSON_Compare(want, stored, TRUE)) {
    char *diff = first_difference(want, stored);
    g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_MISMATCH,
                "trace '%s' is not configuration %u of figure %s as it runs now (%s); save the traces again with "
                "ptdsim figure %s --save-traces DIR",
                path, ctx->runs - 1, ctx->name, diff, ctx->name);
    g_free(diff);
    cJSON_Delete(run);
    run = NULL;
    if (events) {
      cJSON_Delete(*events);
      *events = NULL;
    }
  }
  cJSON_Delete(want);
  cJSON_Delete(stored);
  return run;
}

static cJSON *figure_run(TraceFigureContext *ctx, const SimPlanRequest *req, cJSON **events, GError **error) {
  guint k = ctx->runs++;
  if (ctx->mode == TRACE_FIGURE_SIMULATE && !events)
    return trace_run_full(req, ctx->rt, ctx->cluster, ctx->profile, NULL, 0, error);
  PtdTmpDir *tmp_dir = NULL;
  char *path;
  if (ctx->mode == TRACE_FIGURE_SIMULATE) {
    /* The diagrams draw from a trace: one goes through a private directory,
     * removed also when a signal stops the figure. */
    GError *local = NULL;
    if (!(tmp_dir = ptd_tmp_dir_new("ptdsim-figure", "timeline.json", &local))) {
      g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_READ, "%s's timeline: %s", ctx->name, local->message);
      g_error_free(local);
      return NULL;
    }
    path = g_strdup(ptd_tmp_dir_file(tmp_dir));
  } else
    path = trace_figure_trace_path(ctx, k);
  cJSON *run = NULL;
  if (ctx->mode == TRACE_FIGURE_FROM_TRACES)
    run = figure_read(ctx, req, path, events, error);
  else {
    cJSON *made = trace_run_full(req, ctx->rt, ctx->cluster, ctx->profile, path, TRACE_FIGURE_MAX_EVENTS, error);
    if (made && events)
      run = trace_read(path, NULL, events, error);
    else
      run = made, made = NULL;
    cJSON_Delete(made);
  }
  ptd_tmp_dir_free(tmp_dir);
  g_free(path);
  return run;
}

void trace_figure_network(const TraceFigureContext *ctx, SimPlanRequest *req) {
  if (ctx->network) {
    req->network = *ctx->network;
    req->network_given = TRUE;
  }
}

cJSON *trace_figure_run(TraceFigureContext *ctx, const SimPlanRequest *req, GError **error) {
  return figure_run(ctx, req, NULL, error);
}

cJSON *trace_figure_run_events(TraceFigureContext *ctx, const SimPlanRequest *req, cJSON **events, GError **error) {
  *events = NULL;
  return figure_run(ctx, req, events, error);
}
