/* ptdsim — pipeline schedule diagrams (see diagrams.h).
 *
 * A box is one pass of one item (a microbatch, or a token slice) of one
 * model chunk on one pipeline stage: the compute ops of that pass on the
 * compute stream of the stage's GPU, from the first start to the last end.
 * A recomputation belongs to the backward box: it runs right before that
 * backward and only for it.  Communication is left out, as both papers draw
 * compute alone; a grey bar under each row, up to the run's flush (the end
 * of its last backward), shows where the device idles: the bubble.  The
 * optimizer step after the flush is not drawn either. */
#include "diagrams.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../models/transformer.h"
#include "../taskgraph/timeline.h"
#include "runner.h"

/* PASS_WEIGHT: a zero-bubble schedule's weight gradients apart (its
 * backward box is then the input gradient alone). */
typedef enum { PASS_FORWARD, PASS_BACKWARD, PASS_WEIGHT, N_PASSES } Pass;

static const char *const pass_names[N_PASSES] = {"forward", "backward", "weight"};

typedef struct {
  guint stage, item, chunk; /* 0-based */
  Pass pass;
  gint64 t0_ns, t1_ns;
} Box;

/* --- reading the boxes off the trace events --- */

/* Trace times are microseconds with three decimals: exact nanoseconds. */
static gint64 ns_of(const cJSON *v) { return cJSON_IsNumber(v) ? (gint64)llround(v->valuedouble * 1000.0) : -1; }

static const char *string_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The pass, the item's unit ("mb" or "slice": its key in the event's
 * args) and the model chunk of an op, from its args (traces/perfetto.c:
 * "pass", "mb" or "slice", and "chunk" when there are several).  FALSE for
 * an op of no pass (the optimizer step). */
static gboolean pass_of(const cJSON *args, Pass *pass, const char **unit, guint *chunk) {
  const char *word = string_of(args, "pass");
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(args, "chunk");
  if (!word)
    return FALSE;
  if (strcmp(word, "forward") == 0)
    *pass = PASS_FORWARD;
  else if (strcmp(word, "backward") == 0 || strcmp(word, "recompute") == 0)
    *pass = PASS_BACKWARD;
  else if (strcmp(word, "weight") == 0)
    *pass = PASS_WEIGHT;
  else
    return FALSE;
  *unit = cJSON_GetObjectItemCaseSensitive(args, "slice") ? "slice" : "mb";
  *chunk = cJSON_IsNumber(c) && c->valuedouble >= 0 ? (guint)c->valuedouble : 0;
  return TRUE;
}

static gint by_stage_then_start(gconstpointer pa, gconstpointer pb) {
  const Box *a = pa, *b = pb;
  if (a->stage != b->stage)
    return a->stage < b->stage ? -1 : 1;
  if (a->t0_ns != b->t0_ns)
    return a->t0_ns < b->t0_ns ? -1 : 1;
  if (a->pass != b->pass)
    return a->pass < b->pass ? -1 : 1;
  if (a->chunk != b->chunk)
    return a->chunk < b->chunk ? -1 : 1;
  return a->item < b->item ? -1 : a->item > b->item;
}

/* Stage s is drawn from one GPU, tensor rank 0 of replica 0 (the others
 * run the same timeline), found by its process name. */
static gboolean stage_gpus(const cJSON *events, guint stages, gint *pid_of, GError **error) {
  for (guint s = 0; s < stages; s++)
    pid_of[s] = -1;
  const cJSON *e;
  cJSON_ArrayForEach(e, events) {
    const char *ph = string_of(e, "ph"), *what = string_of(e, "name");
    const char *label = string_of(cJSON_GetObjectItemCaseSensitive(e, "args"), "name");
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(e, "pid");
    unsigned g, s, i, k;
    if (ph && strcmp(ph, "M") == 0 && what && strcmp(what, "process_name") == 0 && label && cJSON_IsNumber(pid) &&
        sscanf(label, "GPU %u (stage %u, tp %u, replica %u", &g, &s, &i, &k) == 4 && i == 0 && k == 0 && s < stages)
      pid_of[s] = (gint)pid->valuedouble;
  }
  for (guint s = 0; s < stages; s++)
    if (pid_of[s] < 0) {
      g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT,
                  "the trace names no GPU for pipeline stage %u (no process \"GPU n (stage %u, tp 0, replica 0)\")", s,
                  s);
      return FALSE;
    }
  return TRUE;
}

/* The boxes of one run, sorted by stage, then start; NULL and an error
 * when an op of a pass lacks its item or times, or a stage does not have
 * `per_stage` boxes. */
static GArray *read_boxes(const cJSON *events, guint stages, guint per_stage, GError **error) {
  gint *pid_of = g_new(gint, stages);
  if (!stage_gpus(events, stages, pid_of, error)) {
    g_free(pid_of);
    return NULL;
  }
  GArray *boxes = g_array_new(FALSE, FALSE, sizeof(Box));
  /* (stage, pass, chunk, item) packed in 64 bits -> index + 1 in boxes */
  g_return_val_if_fail(stages < (1u << 12), NULL);
  GHashTable *index = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
  const char *compute = sim_timeline_category_name(SIM_CAT_COMPUTE);
  const cJSON *e;
  gboolean ok = TRUE;
  cJSON_ArrayForEach(e, events) {
    const char *ph = string_of(e, "ph"), *cat = string_of(e, "cat"), *name = string_of(e, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args"), *pid = cJSON_GetObjectItemCaseSensitive(e, "pid"),
                *tid = cJSON_GetObjectItemCaseSensitive(e, "tid");
    /* Ops only (their nested part slices carry no "op"), on a compute stream. */
    if (!ph || strcmp(ph, "X") != 0 || !cat || strcmp(cat, compute) != 0 || !name || !cJSON_IsNumber(pid) ||
        !cJSON_IsNumber(tid) || tid->valuedouble != 0 || !cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(args, "op")))
      continue;
    guint stage = 0;
    while (stage < stages && pid_of[stage] != (gint)pid->valuedouble)
      stage++;
    Pass pass;
    const char *unit;
    guint chunk;
    if (stage == stages || !pass_of(args, &pass, &unit, &chunk))
      continue;
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(args, unit);
    gint64 t0 = ns_of(cJSON_GetObjectItemCaseSensitive(e, "ts"));
    gint64 dur = ns_of(cJSON_GetObjectItemCaseSensitive(e, "dur"));
    if (!cJSON_IsNumber(item) || item->valuedouble < 0 || item->valuedouble >= G_MAXUINT32 || chunk > 0xffff ||
        t0 < 0 || dur < 0) {
      g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT,
                  "the trace's op \"%s\" on stage %u lacks args.%s, ts or dur", name, stage, unit);
      ok = FALSE;
      break;
    }
    Box b = {stage, (guint)item->valuedouble, chunk, pass, t0, t0 + dur};
    gint64 key = ((gint64)stage << 50) | ((gint64)pass << 48) | ((gint64)chunk << 32) | b.item;
    guint at = GPOINTER_TO_UINT(g_hash_table_lookup(index, &key));
    if (at == 0) {
      g_array_append_val(boxes, b);
      g_hash_table_insert(index, g_memdup2(&key, sizeof key), GUINT_TO_POINTER(boxes->len));
    } else {
      Box *old = &g_array_index(boxes, Box, at - 1);
      old->t0_ns = MIN(old->t0_ns, b.t0_ns);
      old->t1_ns = MAX(old->t1_ns, b.t1_ns);
    }
  }
  g_hash_table_unref(index);
  g_free(pid_of);
  guint *count = g_new0(guint, stages);
  for (guint i = 0; ok && i < boxes->len; i++)
    count[g_array_index(boxes, Box, i).stage]++;
  for (guint s = 0; ok && s < stages; s++)
    if (per_stage ? count[s] != per_stage : count[s] == 0) {
      g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT,
                  "the trace has %u passes on pipeline stage %u where the run's configuration makes %u", count[s], s,
                  per_stage);
      ok = FALSE;
    }
  g_free(count);
  if (!ok) {
    g_array_unref(boxes);
    return NULL;
  }
  g_array_sort(boxes, by_stage_then_start);
  return boxes;
}

/* --- one schedule: its run, its boxes, its summary --- */

typedef struct {
  const char *label; /* "GPipe", "1F1B", "interleaved 1F1B", "TeraPipe" */
  cJSON *run;        /* `run --format json` */
  GArray *boxes;
  gboolean terapipe;
  gboolean split; /* a schedule of the zero-bubble family: W boxes, DualPipe's directions */
  gboolean looped; /* interleaved: the analytic bubble over v */
  guint stages, items, chunks;
  gint64 flush_ns; /* the end of the last box */
} Schedule;

static void schedule_clear(Schedule *s) {
  cJSON_Delete(s->run);
  if (s->boxes)
    g_array_unref(s->boxes);
  memset(s, 0, sizeof *s);
}

/* Runs `req` through the figure's runner (simulated, saved or read back)
 * and reads its boxes: p stages, each with a forward and a backward of
 * every item of every chunk. */
static gboolean schedule_run(TraceFigureContext *ctx, const SimPlanRequest *req, const char *label, Schedule *s,
                             GError **error) {
  memset(s, 0, sizeof *s);
  s->label = label;
  cJSON *events = NULL;
  if (!(s->run = trace_figure_run_events(ctx, req, &events, error)))
    return FALSE;
  const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(s->run, "config");
  gboolean tera = s->terapipe = req->schedule_given && !sim_schedule_info(req->schedule)->passes;
  s->stages = (guint)trace_num(cfg, "pp");
  s->chunks = MAX(1u, (guint)trace_num(cfg, "chunks"));
  s->items = (guint)(tera ? trace_num(s->run, "terapipe.token_slices_in_pipeline") : trace_num(cfg, "microbatches"));
  /* a forward and a backward of every item of every chunk; where the
   * backward may be split into B and W (and DualPipe's chunks see half the
   * microbatches each), at least one box a stage */
  const SimScheduleInfo *row =
      sim_schedule_find(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cfg, "schedule")));
  gboolean classic = tera || (row && row->backward == SIM_BACKWARD_WHOLE);
  s->split = !classic;
  s->looped = row && row->chunks == SIM_CHUNKS_ANY;
  if (s->stages == 0 || s->items == 0)
    g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT,
                "the run reports no pipeline stages or no %s", tera ? "token slices" : "microbatches");
  else
    s->boxes = read_boxes(events, s->stages, classic ? 2 * s->chunks * s->items : 0, error);
  cJSON_Delete(events);
  if (!s->boxes) {
    g_prefix_error(error, "%s: ", label);
    return FALSE;
  }
  for (guint i = 0; i < s->boxes->len; i++)
    s->flush_ns = MAX(s->flush_ns, g_array_index(s->boxes, Box, i).t1_ns);
  return TRUE;
}

/* The analytic bubble's formula, as the run computes it. */
static const char *analytic_formula(const Schedule *s) {
  if (s->terapipe)
    return "(K-1)/M";
  return s->looped ? "(p-1)/(v m)" : "(p-1)/m";
}

/* The rows of the CSV: one per box.  `tokens`, when given, is each token
 * slice's length (TeraPipe). */
static void add_rows(cJSON *rows, const Schedule *s, const char *row_key, const char *item_key,
                     const double *tokens, guint n_tokens) {
  for (guint i = 0; i < s->boxes->len; i++) {
    const Box *b = &g_array_index(s->boxes, Box, i);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, row_key, b->stage + 1);
    trace_row_copy(o, s->run, "config.schedule", NULL);
    cJSON_AddStringToObject(o, "pass", pass_names[b->pass]);
    cJSON_AddNumberToObject(o, item_key, b->item + 1);
    if (!tokens)
      cJSON_AddNumberToObject(o, "chunk", b->chunk + 1);
    else if (b->item < n_tokens)
      cJSON_AddNumberToObject(o, "tokens", tokens[b->item]);
    cJSON_AddNumberToObject(o, "start_s", b->t0_ns / 1e9);
    cJSON_AddNumberToObject(o, "end_s", b->t1_ns / 1e9);
    cJSON_AddItemToArray(rows, o);
  }
}

/* The figure's JSON and text for each schedule drawn. */
static void summarize(TraceFigureOut *out, const Schedule *sch, guint n) {
  cJSON *list = cJSON_AddArrayToObject(out->json, "schedules");
  g_string_append_printf(out->text, "%-17s %8s %12s %9s %8s %9s  %s\n", "schedule", "boxes", "iteration ms",
                         "flush ms", "bubble", "analytic", "formula");
  for (guint i = 0; i < n; i++) {
    const Schedule *s = &sch[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "label", s->label);
    trace_row_copy(o, s->run, "config.schedule", NULL);
    cJSON_AddNumberToObject(o, "boxes", s->boxes->len);
    trace_row_copy(o, s->run, "iteration_time_s", NULL);
    cJSON_AddNumberToObject(o, "flush_s", s->flush_ns / 1e9);
    trace_row_copy(o, s->run, "bubble_fraction", NULL);
    trace_row_copy(o, s->run, "analytic_bubble_fraction", NULL);
    cJSON_AddStringToObject(o, "analytic_formula", analytic_formula(s));
    trace_row_copy(o, s->run, "config", NULL);
    cJSON_AddItemToArray(list, o);
    g_string_append_printf(out->text, "%-17s %8u %12.3f %9.3f %8.4f %9.4f  %s\n", s->label, s->boxes->len,
                           trace_num(s->run, "iteration_time_s") * 1e3, s->flush_ns * 1e-6,
                           trace_num(s->run, "bubble_fraction"), trace_num(s->run, "analytic_bubble_fraction"),
                           analytic_formula(s));
  }
}

/* --- drawing --- */

/* The colour `rgb` mixed with white: the paper's lighter shade for a
 * device's second model chunk. */
static guint32 lighter(guint32 rgb) {
  guint32 out = 0;
  for (int shift = 0; shift <= 16; shift += 8) {
    guint c = (rgb >> shift) & 0xff;
    out |= (guint32)(c + (255 - c) * 11 / 20) << shift;
  }
  return out;
}

#define IDLE_RGB 0xD4D4D4

typedef struct {
  guint pass[N_PASSES][2]; /* [pass][second or later chunk] */
  guint idle;
} Classes;

/* Forward in blue and backward in green, as the papers draw them; a
 * split backward's weight gradients (W) in orange, its input gradient (B)
 * in the backward's green. */
static void add_classes_for(TraceGantt *g, gboolean chunk_shades, gboolean weights, const char *chunk2, Classes *k) {
  const guint32 rgb[N_PASSES] = {trace_plot_palette_rgb(0), trace_plot_palette_rgb(2), trace_plot_palette_rgb(1)};
  static const char *const split_names[N_PASSES] = {"forward (F)", "input gradient (B)", "weight gradient (W)"};
  guint n = weights ? N_PASSES : PASS_WEIGHT;
  for (guint p = 0; p < n; p++)
    k->pass[p][0] = k->pass[p][1] = trace_gantt_add_class(g, weights ? split_names[p] : pass_names[p], rgb[p]);
  if (!weights)
    k->pass[PASS_WEIGHT][0] = k->pass[PASS_WEIGHT][1] = k->pass[PASS_BACKWARD][0];
  for (guint p = 0; chunk_shades && p < n; p++) {
    char legend[64];
    g_snprintf(legend, sizeof legend, "%s, %s", weights ? split_names[p] : pass_names[p], chunk2);
    k->pass[p][1] = trace_gantt_add_class(g, legend, lighter(rgb[p]));
  }
  k->idle = trace_gantt_add_class(g, "idle (pipeline bubble)", IDLE_RGB);
}

static void add_classes(TraceGantt *g, gboolean chunk_shades, Classes *k) {
  add_classes_for(g, chunk_shades, FALSE, "model chunk 2", k);
}

/* A schedule on rows row0 .. row0 + p - 1: the idle bars first, so that
 * the boxes cover them, each box numbered by its item from 1. */
static void draw_schedule(TraceGantt *g, guint row0, const Schedule *s, const Classes *k) {
  for (guint r = 0; r < s->stages; r++)
    trace_gantt_add_box(g, row0 + r, 0, s->flush_ns / 1e9, k->idle, NULL);
  for (guint i = 0; i < s->boxes->len; i++) {
    const Box *b = &g_array_index(s->boxes, Box, i);
    char label[16];
    g_snprintf(label, sizeof label, "%u", b->item + 1);
    trace_gantt_add_box(g, row0 + b->stage, b->t0_ns / 1e9, b->t1_ns / 1e9, k->pass[b->pass][b->chunk > 0], label);
  }
}

static char **row_labels(const char *prefix, guint n) {
  char **labels = g_new0(char *, n + 1);
  for (guint i = 0; i < n; i++)
    labels[i] = g_strdup_printf("%s %u", prefix, i + 1);
  return labels;
}

/* "GPT, 8 layers, h 1024, 16 heads, s 1024" */
static char *model_text(const ModelShape *m) {
  return g_strdup_printf("GPT, %u layers, h %u, %u heads, s %u", m->layers, m->hidden, m->heads, m->seq_len);
}

/* --- SC21 figures 3 and 4 --- */

/* A small GPT whose picture reads like the paper's: 8 layers on p = 4
 * devices (2 layers each, so 2 model chunks of 1 layer when interleaved),
 * m = 8 microbatches of one sequence.  No recomputation, so that a
 * backward box is the backward pass alone, about twice a forward as the
 * paper draws it.  The analytic network unless --network says otherwise:
 * the diagram draws compute only, and the 4 stages share one node, where
 * a send takes microseconds under either model. */
static void sc21_request(const TraceFigureContext *ctx, SimSchedule schedule, guint chunks, SimPlanRequest *req) {
  memset(req, 0, sizeof *req);
  req->model = (ModelShape){.layers = 8, .hidden = 1024, .heads = 16, .seq_len = 1024, .vocab = 4096};
  req->gpus = 4;
  req->tp = 1;
  req->pp = 4;
  req->dp = 1;
  req->global_batch = 8;
  req->micro_batch = 1;
  req->schedule = schedule;
  req->schedule_given = TRUE;
  req->chunks = chunks;
  req->recompute = MODEL_RECOMPUTE_NONE;
  req->recompute_given = TRUE;
  req->network = ctx->network ? *ctx->network : SIM_NETWORK_ANALYTIC;
  req->network_given = TRUE;
}

static char *sc21_subtitle(const TraceFigureContext *ctx, const SimPlanRequest *req, const Schedule *sch, guint n) {
  char *model = model_text(&req->model);
  GString *s = g_string_new(NULL);
  g_string_append_printf(s, "%s; p %u, m %u, no recompute; %s, %s; bubble", model, req->pp,
                         req->global_batch / req->micro_batch, ctx->cluster->name, ctx->profile->name);
  for (guint i = 0; i < n; i++)
    g_string_append_printf(s, "%s%s%s %.1f%% (analytic %s %.1f%%)", i ? "," : "", n > 1 ? " " : "",
                           n > 1 ? sch[i].label : "", 100 * trace_num(sch[i].run, "bubble_fraction"),
                           analytic_formula(&sch[i]), 100 * trace_num(sch[i].run, "analytic_bubble_fraction"));
  g_free(model);
  return g_string_free(s, FALSE);
}

static void sc21_heading(const TraceFigureContext *ctx, const SimPlanRequest *req, const char *what, GString *text) {
  char *model = model_text(&req->model);
  g_string_append_printf(text, "SC21 %s on %s with %s\n%s, vocabulary %u; p %u, t 1, d 1, m %u microbatches of %u, "
                               "no recomputation, network %s\n",
                         what, ctx->cluster->name, ctx->profile->name, model, req->model.vocab, req->pp,
                         req->global_batch / req->micro_batch, req->micro_batch,
                         ptd_word_of(sim_network_words, (int)req->network));
  g_free(model);
}

gboolean trace_megatron_fig3(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  SimPlanRequest req;
  sc21_request(ctx, SIM_SCHEDULE_GPIPE, 0, &req);
  Schedule s;
  if (!schedule_run(ctx, &req, "GPipe", &s, error)) {
    schedule_clear(&s);
    return FALSE;
  }
  sc21_heading(ctx, &req, "figure 3: the GPipe schedule, all forwards then all backwards", out->text);
  summarize(out, &s, 1);
  add_rows(out->rows, &s, "device", "microbatch", NULL, 0);
  cJSON_AddStringToObject(out->json, "source", "Narayanan et al., SC21, figure 3");
  cJSON_AddStringToObject(out->json, "numbering", "devices and microbatches from 1, as in the paper");

  char **labels = row_labels("device", s.stages);
  TraceGantt *g = trace_gantt_new("SC21 figure 3: GPipe, all forwards, then all backwards, then a pipeline flush",
                                  s.stages, (const char *const *)labels, s.flush_ns / 1e9);
  g_strfreev(labels);
  char *sub = sc21_subtitle(ctx, &req, &s, 1);
  trace_gantt_set_subtitle(g, sub);
  g_free(sub);
  Classes k;
  add_classes(g, FALSE, &k);
  draw_schedule(g, 0, &s, &k);
  out->gantt = g;
  schedule_clear(&s);
  return TRUE;
}

gboolean trace_megatron_fig4(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  SimPlanRequest req[2];
  sc21_request(ctx, SIM_SCHEDULE_1F1B, 0, &req[0]);
  sc21_request(ctx, SIM_SCHEDULE_INTERLEAVED, 2, &req[1]);
  Schedule s[2];
  memset(s, 0, sizeof s);
  static const char *const names[2] = {"1F1B", "interleaved 1F1B"}, *const rows[2] = {"1F1B device", "interleaved "
                                                                                                       "device"};
  for (guint i = 0; i < 2; i++)
    if (!schedule_run(ctx, &req[i], names[i], &s[i], error)) {
      schedule_clear(&s[0]);
      schedule_clear(&s[1]);
      return FALSE;
    }
  sc21_heading(ctx, &req[0], "figure 4: 1F1B (above) and interleaved 1F1B with 2 model chunks per device (below)",
               out->text);
  summarize(out, s, 2);
  for (guint i = 0; i < 2; i++)
    add_rows(out->rows, &s[i], "device", "microbatch", NULL, 0);
  cJSON_AddStringToObject(out->json, "source", "Narayanan et al., SC21, figure 4");
  cJSON_AddStringToObject(out->json, "numbering", "devices, microbatches and model chunks from 1, as in the paper");

  guint n_rows = s[0].stages + s[1].stages;
  char **labels = g_new0(char *, n_rows + 1);
  for (guint i = 0, r = 0; i < 2; i++)
    for (guint d = 0; d < s[i].stages; d++)
      labels[r++] = g_strdup_printf("%s %u", rows[i], d + 1);
  TraceGantt *g = trace_gantt_new("SC21 figure 4: 1F1B (top) and interleaved 1F1B with 2 model chunks per device "
                                  "(bottom)",
                                  n_rows, (const char *const *)labels, MAX(s[0].flush_ns, s[1].flush_ns) / 1e9);
  g_strfreev(labels);
  char *sub = sc21_subtitle(ctx, &req[0], s, 2);
  trace_gantt_set_subtitle(g, sub);
  g_free(sub);
  Classes k;
  add_classes(g, TRUE, &k);
  draw_schedule(g, 0, &s[0], &k);
  draw_schedule(g, s[0].stages, &s[1], &k);
  out->gantt = g;
  schedule_clear(&s[0]);
  schedule_clear(&s[1]);
  return TRUE;
}

/* --- TeraPipe's token pipeline --- */

/* GPT3-1B, TeraPipe's smallest model, on K = 4 cells of 6 layers, one
 * sequence of 2048 tokens in 8 uniform token slices of 256: few enough
 * boxes to number them, and each later slice attends to a longer context,
 * so its boxes grow wider along the sequence.  The layers alone (or
 * --workload) without recomputation, as TeraPipe's evaluation runs
 * (terapipe_figs.c).  Its default cluster is aws-p3-16xlarge, TeraPipe's
 * own V100 machines, as for the other TeraPipe figures. */
#define TERAPIPE_SLICES 8

gboolean trace_terapipe_schedule(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  SimPlanRequest req;
  memset(&req, 0, sizeof req);
  if (!model_lookup("gpt3-1b", &req.model)) {
    g_set_error(error, TRACE_RUNNER_ERROR, TRACE_RUNNER_ERROR_FORMAT, "gpt3-1b is not a built-in model");
    return FALSE;
  }
  req.gpus = 4;
  req.tp = 1;
  req.pp = 4;
  req.dp = 1;
  req.global_batch = 1;
  req.micro_batch = 1;
  req.schedule = SIM_SCHEDULE_TERAPIPE;
  req.schedule_given = TRUE;
  req.slices_given = TRUE, req.slices_mode = SIM_SLICES_UNIFORM, req.n_slices = TERAPIPE_SLICES;
  req.workload = ctx->workload ? *ctx->workload : SIM_WORKLOAD_LAYERS;
  req.workload_given = TRUE;
  req.recompute = MODEL_RECOMPUTE_NONE;
  req.recompute_given = TRUE;
  trace_figure_network(ctx, &req);
  Schedule s;
  if (!schedule_run(ctx, &req, "TeraPipe", &s, error)) {
    schedule_clear(&s);
    return FALSE;
  }
  /* Each token slice's length, in pipeline order. */
  GArray *tokens = g_array_new(FALSE, FALSE, sizeof(double));
  const cJSON *row, *t;
  const cJSON *per_batch_slice = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s.run, "terapipe"),
                                                                  "token_slices");
  cJSON_ArrayForEach(row, per_batch_slice) {
    cJSON_ArrayForEach(t, row) {
      if (cJSON_IsNumber(t))
        g_array_append_val(tokens, t->valuedouble);
    }
  }

  gboolean whole = req.workload == SIM_WORKLOAD_GPT;
  g_string_append_printf(out->text, "TeraPipe's token pipeline on %s with %s\nGPT3-1B (%u layers, h %u), one sequence "
                                    "of %u tokens in %u uniform token slices on K = %u cells, %s, no "
                                    "recomputation\n",
                         ctx->cluster->name, ctx->profile->name, req.model.layers, req.model.hidden, req.model.seq_len,
                         s.items, s.stages, whole ? "the whole training step" : "the layers alone");
  summarize(out, &s, 1);
  add_rows(out->rows, &s, "cell", "slice", (const double *)(gpointer)tokens->data, tokens->len);
  g_array_unref(tokens);
  cJSON_AddStringToObject(out->json, "source", "Li et al., ICML 2021: TeraPipe's token-level pipeline");
  cJSON_AddStringToObject(out->json, "numbering", "cells and token slices from 1, in sequence order");

  char **labels = row_labels("cell", s.stages);
  char *title = g_strdup_printf("TeraPipe: one GPT3-1B sequence in %u token slices through %u pipeline cells",
                                s.items, s.stages);
  TraceGantt *g = trace_gantt_new(title, s.stages, (const char *const *)labels, s.flush_ns / 1e9);
  g_free(title);
  g_strfreev(labels);
  char *sub = g_strdup_printf("%u tokens, %u slices of %u; %s; %s, %s; bubble %.1f%% (analytic %s %.1f%%)",
                              req.model.seq_len, s.items, req.model.seq_len / s.items,
                              whole ? "the whole training step" : "the layers alone", ctx->cluster->name,
                              ctx->profile->name, 100 * trace_num(s.run, "bubble_fraction"), analytic_formula(&s),
                              100 * trace_num(s.run, "analytic_bubble_fraction"));
  trace_gantt_set_subtitle(g, sub);
  g_free(sub);
  Classes k;
  add_classes(g, FALSE, &k);
  draw_schedule(g, 0, &s, &k);
  out->gantt = g;
  schedule_clear(&s);
  return TRUE;
}

/* --- today's schedules --- */

/* The zero-bubble family and DualPipe beside 1F1B, each on its own p = 4
 * rows of one time axis: the small GPT of SC21's figures (8 layers, so one
 * layer per V chunk), m = 8 microbatches, and --stage-times 1,1,1,0: every
 * pass of a stage's microbatch (F, the input gradient B, the weight
 * gradient W) 1 ms and no communication time, T_F = T_B = T_W as the
 * papers draw them (Qi et al. 2024, figures 3, 4 and 8; DeepSeek-V3,
 * figure 5).  Qi et al.'s bubble (plan.h: the longest stage span less its
 * busy time) is in the summary. */
#define SCHEDULES_N 6

gboolean trace_schedules_figure(TraceFigureContext *ctx, TraceFigureOut *out, GError **error) {
  static const SimSchedule scheds[SCHEDULES_N] = {SIM_SCHEDULE_1F1B, SIM_SCHEDULE_ZB_H1,     SIM_SCHEDULE_ZB_H2,
                                                  SIM_SCHEDULE_ZB_V, SIM_SCHEDULE_DUALPIPEV, SIM_SCHEDULE_DUALPIPE};
  static const char *const labels[SCHEDULES_N] = {"1F1B", "ZB-H1", "ZB-H2", "ZB-V", "DualPipeV", "DualPipe"};
  SimPlanRequest req[SCHEDULES_N];
  Schedule s[SCHEDULES_N];
  memset(s, 0, sizeof s);
  for (guint i = 0; i < SCHEDULES_N; i++) {
    sc21_request(ctx, scheds[i], 0, &req[i]);
    req[i].stage_times = TRUE; /* 1, 1, 1 and 0 ms */
    req[i].stage_times_ms[0] = req[i].stage_times_ms[1] = req[i].stage_times_ms[2] = 1;
    if (!schedule_run(ctx, &req[i], labels[i], &s[i], error)) {
      for (guint j = 0; j <= i; j++)
        schedule_clear(&s[j]);
      return FALSE;
    }
  }
  g_string_append_printf(out->text,
                         "Pipeline schedules with the backward split into B (input gradient) and W (weight "
                         "gradient)\np %u, m %u microbatches, --stage-times 1,1,1,0 (T_F = T_B = T_W = 1 ms, no "
                         "communication time)\n",
                         req[0].pp, req[0].global_batch / req[0].micro_batch);
  summarize(out, s, SCHEDULES_N);
  g_string_append_printf(out->text, "%-17s %12s %12s %10s\n", "schedule", "span ms", "ZB bubble ms", "in flight");
  for (guint i = 0; i < SCHEDULES_N; i++)
    g_string_append_printf(out->text, "%-17s %12.3f %12.3f %10.2f\n", labels[i],
                           1e3 * trace_num(s[i].run, "pipeline_schedule.span_s"),
                           1e3 * trace_num(s[i].run, "pipeline_schedule.bubble_s"),
                           trace_num(s[i].run, "pipeline_schedule.peak_inflight_microbatches"));
  for (guint i = 0; i < SCHEDULES_N; i++)
    add_rows(out->rows, &s[i], "device", "microbatch", NULL, 0);
  cJSON_AddStringToObject(out->json, "source",
                          "Qi et al., Zero Bubble Pipeline Parallelism (ICLR 2024), figures 3, 4, 8; DeepSeek-V3 "
                          "technical report, figure 5; torch.distributed.pipelining's schedules");
  cJSON_AddStringToObject(out->json, "numbering", "devices, microbatches and model chunks from 1");

  guint n_rows = 0;
  gint64 flush = 0;
  for (guint i = 0; i < SCHEDULES_N; i++) {
    n_rows += s[i].stages;
    flush = MAX(flush, s[i].flush_ns);
  }
  char **rows = g_new0(char *, n_rows + 1);
  for (guint i = 0, r = 0; i < SCHEDULES_N; i++)
    for (guint d = 0; d < s[i].stages; d++)
      rows[r++] = g_strdup_printf("%s %u", labels[i], d + 1);
  TraceGantt *g = trace_gantt_new("Zero-bubble schedules and DualPipe beside 1F1B: F, B and W as the stages run them",
                                  n_rows, (const char *const *)rows, flush / 1e9);
  g_strfreev(rows);
  char *sub = g_strdup_printf("GPT, 8 layers, h 1024; p %u, m %u; T_F = T_B = T_W = 1 ms, no communication; "
                              "lighter: the second chunk (V) or the reverse direction (DualPipe)",
                              req[0].pp, req[0].global_batch / req[0].micro_batch);
  trace_gantt_set_subtitle(g, sub);
  g_free(sub);
  Classes k;
  add_classes_for(g, TRUE, TRUE, "second chunk or direction", &k);
  for (guint i = 0, r = 0; i < SCHEDULES_N; i++) {
    draw_schedule(g, r, &s[i], &k);
    r += s[i].stages;
  }
  out->gantt = g;
  for (guint i = 0; i < SCHEDULES_N; i++)
    schedule_clear(&s[i]);
  return TRUE;
}
