/* ptdsim — Perfetto / Chrome trace-event JSON writer (see perfetto.h). */
#include "perfetto.h"

#include "../base/outfile.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

G_DEFINE_QUARK(trace-perfetto-error-quark, trace_perfetto_error)

/* The file goes through zlib whether compressed or not: a path ending in
 * ".gz" is gzip (level 1: compressing at level 6 took a third of the time
 * of saving a figure's traces, for files a fifth smaller; zlib's header
 * carries no time, so the bytes are the same run to run), any other is
 * written as is (zlib's transparent mode). */
struct _TracePerfetto {
  PtdOutFile *out; /* the temporary file, renamed into place on commit */
  gzFile f;
  gboolean written;
  guint64 events, max_events;
};

static gboolean io_fail(const char *path, int err, GError **error) {
  g_set_error(error, TRACE_PERFETTO_ERROR, TRACE_PERFETTO_ERROR_IO,
              "cannot write the trace to '%s': %s; give --trace a file in an existing, writable directory", path,
              g_strerror(err));
  return FALSE;
}

TracePerfetto *trace_perfetto_open(const char *path, const char *const *inputs, GError **error) {
  if (!path || !*path) {
    g_set_error(error, TRACE_PERFETTO_ERROR, TRACE_PERFETTO_ERROR_IO,
                "--trace needs a file name, e.g. --trace run.json");
    return NULL;
  }
  PtdOutFile *out = ptd_out_open(path, "--trace", inputs, error);
  if (!out)
    return NULL;
  /* zlib gets its own descriptor: gzclose closes it, the PtdOutFile syncs its own */
  int fd = dup(ptd_out_fd(out));
  gzFile f = fd >= 0 ? gzdopen(fd, g_str_has_suffix(path, ".gz") ? "wb1" : "wbT") : NULL;
  if (!f) {
    int err = errno;
    if (fd >= 0)
      close(fd);
    ptd_out_abort(out);
    io_fail(path, err, error);
    return NULL;
  }
  TracePerfetto *t = g_new0(TracePerfetto, 1);
  t->out = out;
  t->f = f;
  t->max_events = TRACE_PERFETTO_MAX_EVENTS;
  return t;
}

void trace_perfetto_free(TracePerfetto *t) {
  if (!t)
    return;
  if (t->f)
    gzclose(t->f);
  ptd_out_abort(t->out);
  g_free(t);
}

guint64 trace_perfetto_n_events(const TracePerfetto *t) { return t->events; }

void trace_perfetto_set_max_events(TracePerfetto *t, guint64 max_events) { t->max_events = max_events; }

/* Nanoseconds as microseconds, exactly: "1234.567". */
static void add_us(cJSON *o, const char *key, SimTime ns) {
  char buf[48];
  g_snprintf(buf, sizeof buf, "%" G_GINT64_FORMAT ".%03d", ns / 1000, (int)(ns % 1000));
  cJSON_AddRawToObject(o, key, buf);
}

/* Integers as raw text: cJSON prints every number through "%1.15g" and
 * reads it back to check, which dominated the writer's time. */
static void add_int(cJSON *o, const char *key, gint64 v) {
  char buf[24];
  g_snprintf(buf, sizeof buf, "%" G_GINT64_FORMAT, v);
  cJSON_AddRawToObject(o, key, buf);
}

/* Each event is built and printed by cJSON, then freed: the trace streams to
 * disk in constant memory whatever its size.  Events are separated by ",\n"
 * (one per line, easy to grep). */
static void emit(TracePerfetto *t, cJSON *event) {
  char buf[1024];
  gzputs(t->f, t->events ? ",\n" : "\n");
  if (cJSON_PrintPreallocated(event, buf, sizeof buf, FALSE))
    gzputs(t->f, buf);
  else { /* longer than any event ptdsim writes; kept for safety */
    char *text = cJSON_PrintUnformatted(event);
    gzputs(t->f, text);
    cJSON_free(text);
  }
  cJSON_Delete(event);
  t->events++;
}

static void emit_meta(TracePerfetto *t, const char *what, guint pid, gint tid, const char *key, cJSON *value) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", what);
  cJSON_AddStringToObject(e, "ph", "M");
  add_int(e, "pid", pid);
  if (tid >= 0)
    add_int(e, "tid", tid);
  cJSON *args = cJSON_AddObjectToObject(e, "args");
  cJSON_AddItemToObject(args, key, value);
  emit(t, e);
}

/* The microbatch (PTD-P) or token slice (TeraPipe) an op works on. */
static gint32 item_of(const SimTimeline *tl, const SimOpTag *tag) {
  if (tl->mirror && tag->microbatch >= (gint32)tl->mirror)
    return (gint32)(2 * tl->mirror) - 1 - tag->microbatch;
  return tag->microbatch;
}

/* Whether an op belongs to a pass (sim/tags.h): not the "other" work, such
 * as the gradient all-reduces and the optimizer step. */
static gboolean has_pass(const SimOpTag *tag) {
  return tag->pass < SIM_PASS_OTHER || tag->pass == SIM_PASS_WEIGHT;
}

/* "forward mb 3 chunk 1": the pass and item an op belongs to ("" if none). */
static void what_of(const SimTimeline *tl, const SimOpTag *tag, char *buf, gsize len) {
  static const char *const passes[] = {"forward", "backward", "recompute", "other", "weight"};
  if (!has_pass(tag))
    buf[0] = '\0';
  else if (tl->plan->chunks > 1)
    g_snprintf(buf, len, "%s %s %d chunk %d", passes[tag->pass], tl->item_unit, item_of(tl, tag), tag->chunk);
  else
    g_snprintf(buf, len, "%s %s %d", passes[tag->pass], tl->item_unit, item_of(tl, tag));
}

/* "layer 5 attention", "layers 0-23", "embedding"; "" for no part. */
static void piece_label(const SimTimelinePiece *pc, char *buf, gsize len) {
  const char *part = sim_timeline_part_name(pc->part);
  if (pc->part == SIM_PART_LAYERS)
    g_snprintf(buf, len, "layers %d-%d", pc->layer, pc->layer + pc->layers - 1);
  else if (pc->layer >= 0)
    g_snprintf(buf, len, "layer %d %s", pc->layer, part);
  else
    g_snprintf(buf, len, "%s", part);
}

static const char *act_label(guint act) {
  static const char *const names[SIM_N_ACTS] = {"", "param all-gather", "grad reduce-scatter",
                                                "updated-param all-gather", "broadcast", "grad bucket all-reduce"};
  return act < SIM_N_ACTS ? names[act] : "";
}

/* An op's name: what it does, to which part, for which pass and item:
 * "layer 5 attention (forward mb 3)", "tp all-reduce (backward mb 0)",
 * "param all-gather, layer 2 MLP up (recompute mb 1)", "optimizer step". */
/* The pass and item a piece belongs to: its own pass, else its op's. */
static void piece_what(const SimTimeline *tl, const SimOpTag *tag, const SimTimelinePiece *pc, char *buf, gsize len) {
  SimOpTag own = *tag;
  if (pc->pass != SIM_TIMELINE_PASS_OP)
    own.pass = pc->pass;
  what_of(tl, &own, buf, len);
}

static void op_name(const SimTimeline *tl, const SimOpTag *tag, const SimTimelinePiece *pc, guint n_pc, char *buf,
                    gsize len) {
  char what[64], subject[112], first[48];
  what_of(tl, tag, what, sizeof what);
  if (n_pc == 1 && pc->act != SIM_ACT_RUN) { /* "param all-gather, layer 2 MLP up" */
    piece_label(pc, first, sizeof first);
    g_snprintf(subject, sizeof subject, "%s%s%s", act_label(pc->act), *first ? ", " : "", first);
  } else if (n_pc == 1 && tag->category == SIM_CAT_COMPUTE) { /* "layer 5 attention" */
    piece_label(pc, subject, sizeof subject);
    piece_what(tl, tag, pc, what, sizeof what);
  } else if (n_pc > 1 && tag->category == SIM_CAT_COMPUTE) { /* parts back to back: first to last */
    char last[48], what_first[64], what_last[64];
    piece_label(&pc[0], first, sizeof first);
    piece_label(&pc[n_pc - 1], last, sizeof last);
    piece_what(tl, tag, &pc[0], what_first, sizeof what_first);
    piece_what(tl, tag, &pc[n_pc - 1], what_last, sizeof what_last);
    if (strcmp(what_first, what_last) != 0) { /* "logits and loss (backward mb 0) ... layer 7 attention (recompute mb 0)" */
      g_snprintf(buf, len, "%s (%s) ... %s (%s)", first, what_first, last, what_last);
      return;
    }
    g_snprintf(subject, sizeof subject, "%s ... %s", first, last);
    g_strlcpy(what, what_first, sizeof what);
  } else if (tag->category == SIM_CAT_DP && !has_pass(tag)) {
    if (tag->layer == -2) /* the tied embedding's gradient all-reduce */
      g_strlcpy(subject, "embedding grad all-reduce", sizeof subject);
    else
      g_snprintf(subject, sizeof subject, "grad all-reduce (stage %d)", tag->stage);
  } else
    g_strlcpy(subject, sim_timeline_category_label(tag->category), sizeof subject);
  if (*what)
    g_snprintf(buf, len, "%s (%s)", subject, what);
  else
    g_snprintf(buf, len, "%s", subject);
}

/* Events on top of one per op and stream: a compute op that runs several
 * parts back to back gets one nested slice per part; a pipeline transfer
 * gets a flow arrow (two events) from the sender to the receiver. */
static guint extra_events(const SimTimeline *tl, guint op) {
  const SimEngine *e = tl->engine;
  const SimOpTag *tag = sim_engine_op_tag(e, op);
  guint n;
  sim_timeline_pieces(tl, op, &n);
  if (tag->category == SIM_CAT_COMPUTE && n > 1)
    return n;
  if ((tag->category == SIM_CAT_PP || tag->category == SIM_CAT_PP_GATHER) &&
      sim_engine_op_n_streams(e, op) == 2)
    return 1; /* per stream: the arrow's start on one, its end on the other */
  return 0;
}

static cJSON *slice_event(const char *name, const char *cat, SimTime s0, SimTime s1, guint pid, guint tid) {
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "name", name);
  cJSON_AddStringToObject(ev, "cat", cat);
  cJSON_AddStringToObject(ev, "ph", "X");
  add_us(ev, "ts", s0);
  add_us(ev, "dur", s1 - s0);
  add_int(ev, "pid", pid);
  add_int(ev, "tid", tid);
  return ev;
}

/* The nested slices of a compute op's parts, in order, each as long as its
 * share of the op (rounded to the ns; the last ends with the op). */
static void emit_pieces(TracePerfetto *t, const SimTimeline *tl, const SimOpTag *tag, const SimTimelinePiece *pc,
                        guint n, SimTime s0, SimTime s1, guint pid, guint tid) {
  char what[64], label[64], name[160];
  double cum = 0;
  SimTime at = s0;
  for (guint i = 0; i < n; i++) {
    SimOpTag own = *tag; /* a piece may belong to another pass than its op */
    if (pc[i].pass != SIM_TIMELINE_PASS_OP)
      own.pass = pc[i].pass;
    what_of(tl, &own, what, sizeof what);
    cum += pc[i].seconds;
    SimTime end = i + 1 == n ? s1 : MIN(s1, s0 + (SimTime)llround(cum * 1e9));
    piece_label(&pc[i], label, sizeof label);
    g_snprintf(name, sizeof name, *what ? "%s (%s)" : "%s", label, what);
    cJSON *ev = slice_event(name, sim_timeline_category_name(tag->category), at, MAX(at, end), pid, tid);
    cJSON *args = cJSON_AddObjectToObject(ev, "args");
    cJSON_AddStringToObject(args, "part", sim_timeline_part_name(pc[i].part));
    if (has_pass(&own)) {
      static const char *const passes[] = {"forward", "backward", "recompute", "other", "weight"};
      cJSON_AddStringToObject(args, "pass", passes[own.pass]);
    }
    if (pc[i].layer >= 0)
      add_int(args, pc[i].part == SIM_PART_LAYERS ? "first_layer" : "layer", pc[i].layer);
    emit(t, ev);
    at = MAX(at, end);
  }
}

/* One end of a pipeline transfer's arrow: "s" on the sender's stream, "f"
 * on the receiver's, both bound to the transfer's slice there. */
static void emit_flow(TracePerfetto *t, guint op, gboolean start, SimTime ts, guint pid, guint tid) {
  cJSON *ev = cJSON_CreateObject();
  cJSON_AddStringToObject(ev, "name", "pp transfer");
  cJSON_AddStringToObject(ev, "cat", "pp");
  cJSON_AddStringToObject(ev, "ph", start ? "s" : "f");
  if (!start)
    cJSON_AddStringToObject(ev, "bp", "e");
  add_int(ev, "id", op);
  add_us(ev, "ts", ts);
  add_int(ev, "pid", pid);
  add_int(ev, "tid", tid);
  emit(t, ev);
}

gboolean trace_perfetto_write(const SimTimeline *tl, gpointer data, GError **error) {
  TracePerfetto *t = data;
  const SimPlan *pl = tl->plan;
  const SimEngine *e = tl->engine;
  guint n_gpus = tl->ts * tl->ds * tl->p, n_streams = n_gpus * SIM_STREAM_KINDS;
  guint64 n_events = (guint64)n_gpus * (2 + SIM_STREAM_KINDS * 2);
  for (guint st = 0; st < n_streams; st++) {
    guint n;
    const guint *ops = sim_engine_stream_ops(e, st, &n);
    n_events += n;
    for (guint j = 0; j < n; j++)
      n_events += extra_events(tl, ops[j]);
  }
  if (n_events > t->max_events) {
    gboolean tera = pl->schedule == SIM_SCHEDULE_TERAPIPE;
    g_set_error(error, TRACE_PERFETTO_ERROR, TRACE_PERFETTO_ERROR_TOO_BIG,
                "the trace would hold %" G_GUINT64_FORMAT " events, over the limit of %" G_GUINT64_FORMAT
                "; trace a smaller run: %s%s",
                n_events, t->max_events,
                tera ? "fewer token slices (--slices uniform:N) or a smaller --global-batch"
                     : "fewer microbatches (a smaller --global-batch or a larger --micro-batch)",
                tl->ts * tl->ds > 1 ? ", or without --no-symmetry" : "");
    return FALSE;
  }

  /* The header: everything but the events, printed by cJSON and left open. */
  cJSON *head = cJSON_CreateObject();
  cJSON_AddStringToObject(head, "displayTimeUnit", "ns");
  cJSON *other = cJSON_AddObjectToObject(head, "otherData");
  cJSON_AddStringToObject(other, "generator", "ptdsim run --trace");
  cJSON_AddStringToObject(other, "schedule", pl->zero ? "zero" : sim_schedule_name(pl->schedule));
  cJSON_AddNumberToObject(other, "gpus", pl->gpus);
  cJSON_AddNumberToObject(other, "tp", pl->tp);
  cJSON_AddNumberToObject(other, "pp", pl->pp);
  cJSON_AddNumberToObject(other, "dp", pl->dp);
  cJSON_AddNumberToObject(other, "simulated_gpus", n_gpus);
  gboolean sym = n_gpus < pl->gpus;
  cJSON_AddStringToObject(other, "symmetry",
                          sym ? "shortcut: each simulated GPU stands for the ranks of its class (its tensor-parallel "
                                "group's, replicas with the same node layout), which run the same timeline; only those "
                                "GPUs are traced"
                              : "none: every GPU simulated and traced");
  cJSON_AddStringToObject(other, "time_unit", "ts and dur in microseconds, exact to the nanosecond");
  char *text = cJSON_PrintUnformatted(head);
  cJSON_Delete(head);
  text[strlen(text) - 1] = '\0'; /* drop the closing brace: the events follow */
  gzputs(t->f, text);
  gzputs(t->f, ",\"traceEvents\":[");
  cJSON_free(text);

  t->events = 0;
  for (guint g = 0; g < n_gpus; g++) {
    guint i = g % tl->ts, k = (g / tl->ts) % tl->ds, s = g / (tl->ts * tl->ds), pid = tl->gpu_of[g];
    guint job_k = tl->replica_of ? tl->replica_of[k] : k;
    guint stood = tl->replicas_stood_for ? tl->replicas_stood_for[k] : tl->ds == 1 ? pl->dp : 1;
    char name[160];
    if (sym)
      g_snprintf(name, sizeof name, "GPU %u (stage %u, tp %u, replica %u; stands for %u tp x %u replicas)", pid, s, i,
                 job_k, tl->ts == 1 ? pl->tp : 1, stood);
    else
      g_snprintf(name, sizeof name, "GPU %u (stage %u, tp %u, replica %u)", pid, s, i, k);
    emit_meta(t, "process_name", pid, -1, "name", cJSON_CreateString(name));
    emit_meta(t, "process_sort_index", pid, -1, "sort_index", cJSON_CreateNumber(g));
    for (guint kind = 0; kind < SIM_STREAM_KINDS; kind++) {
      emit_meta(t, "thread_name", pid, (gint)kind, "name", cJSON_CreateString(sim_timeline_stream_name(kind)));
      emit_meta(t, "thread_sort_index", pid, (gint)kind, "sort_index", cJSON_CreateNumber(kind));
    }
  }
  for (guint g = 0; g < n_gpus; g++)
    for (guint kind = 0; kind < SIM_STREAM_KINDS; kind++) {
      guint n;
      const guint *ops = sim_engine_stream_ops(e, g * SIM_STREAM_KINDS + kind, &n);
      for (guint j = 0; j < n; j++) {
        guint op = ops[j], st = g * SIM_STREAM_KINDS + kind, pid = tl->gpu_of[g];
        const SimOpTag *tag = sim_engine_op_tag(e, op);
        SimTime s0 = sim_engine_op_start(e, op), s1 = sim_engine_op_end(e, op);
        guint n_pc;
        const SimTimelinePiece *pc = sim_timeline_pieces(tl, op, &n_pc);
        char name[192];
        op_name(tl, tag, pc, n_pc, name, sizeof name);
        cJSON *ev = slice_event(name, sim_timeline_category_name(tag->category), s0, s1, pid, kind);
        cJSON *args = cJSON_AddObjectToObject(ev, "args");
        add_int(args, "op", op);
        add_int(args, "stage", tag->stage);
        if (tag->microbatch >= 0 && has_pass(tag)) {
          static const char *const passes[] = {"forward", "backward", "recompute", "other", "weight"};
          cJSON_AddStringToObject(args, "pass", passes[tag->pass]);
          add_int(args, tl->item_unit, item_of(tl, tag));
          if (tl->plan->chunks > 1)
            add_int(args, "chunk", tag->chunk);
        }
        if (n_pc == 1 && pc->layer >= 0)
          add_int(args, pc->part == SIM_PART_LAYERS ? "first_layer" : "layer", pc->layer);
        emit(t, ev);
        if (tag->category == SIM_CAT_COMPUTE && n_pc > 1)
          emit_pieces(t, tl, tag, pc, n_pc, s0, s1, pid, kind);
        if (extra_events(tl, op) == 1) {
          const guint *sts = sim_engine_op_streams(e, op);
          emit_flow(t, op, sts[0] == st, s0, pid, kind);
        }
      }
    }
  gzputs(t->f, "\n]");
  int zerr;
  gzerror(t->f, &zerr);
  if (zerr != Z_OK)
    return io_fail(ptd_out_path(t->out), zerr == Z_ERRNO && errno ? errno : EIO, error);
  t->written = TRUE;
  return TRUE;
}

gboolean trace_perfetto_commit(TracePerfetto *t, const cJSON *meta, GError **error) {
  g_return_val_if_fail(t->written, FALSE);
  if (meta) {
    char *text = cJSON_PrintUnformatted(meta);
    gzputs(t->f, ",\"ptdsim\":");
    gzputs(t->f, text);
    cJSON_free(text);
  }
  gzputs(t->f, "}\n");
  gzFile f = t->f;
  t->f = NULL;
  errno = 0;
  if (gzclose(f) != Z_OK)
    return io_fail(ptd_out_path(t->out), errno ? errno : EIO, error);
  PtdOutFile *out = t->out;
  t->out = NULL;
  return ptd_out_commit(out, error);
}
