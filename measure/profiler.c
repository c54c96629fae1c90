/* A torch.profiler trace read and checked (see profiler.h).  The events are
 * Kineto's (PyTorch's profiler library): "cat" says what an event is —
 * "kernel", "gpu_memset", "gpu_memcpy" (the GPU's operations, "args" with
 * "stream" and "correlation"), "cuda_runtime" and "cuda_driver" (the host's
 * CUDA calls, "args.correlation"), "cpu_op" (ATen operators); complete
 * events ("ph" "X") with "ts" and "dur" in microseconds.  Every other event
 * (flows, metadata, Python functions, annotations) is skipped. */
#include "profiler.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "../base/gzread.h"
#include "../base/jsonutil.h"
#include "../base/text.h"
#include "measurements.h"

const char *calib_prof_gpu_kind_name(CalibProfGpuKind k) {
  return k == CALIB_PROF_KERNEL ? "kernel" : k == CALIB_PROF_MEMSET ? "memset" : "memcpy";
}

void calib_prof_free(CalibProfTrace *t) {
  if (!t)
    return;
  g_free(t->path);
  g_free(t->sha256);
  g_free(t->device);
  g_array_unref(t->gpu);
  g_array_unref(t->api);
  g_array_unref(t->cpu);
  g_string_chunk_free(t->names);
  g_free(t);
}

static gboolean fail(GError **error, const char *label, const char *fmt, ...) G_GNUC_PRINTF(3, 4);
static gboolean fail(GError **error, const char *label, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, CALIB_ERROR, CALIB_ERROR_INVALID, "profiler trace '%s': %s", label, what);
  g_free(what);
  return FALSE;
}

/* The latest time a trace's clock may read and the longest an event may
 * last, in microseconds: Kineto's clock is the host's monotonic or wall
 * clock (about 5e12 us in the shipped traces; 1.7e15 us is today on the
 * wall clock), and no operation of one step lasts a quarter of an hour.
 * With at most CALIB_PROF_MAX_EVENTS events, every sum of nanoseconds fits
 * in 63 bits.  ("ts" is a double: below about 9e12 us it keeps the
 * nanosecond.) */
#define MAX_TS_US 4e15
#define MAX_DUR_US 1e9

/* A "ts" or "dur" in microseconds as integer nanoseconds; FALSE unless a
 * finite number from 0 to `max` microseconds. */
static gboolean time_ns(const cJSON *ev, const char *key, double max, gint64 *ns) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(ev, key);
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > max)
    return FALSE;
  *ns = llround(v->valuedouble * 1000.0);
  return TRUE;
}

/* A whole number from 0 to 2^53 (an id Kineto writes), or -1 when absent;
 * FALSE when present and not such a number. */
static gboolean id_of(const cJSON *obj, const char *key, gint64 *out) {
  const cJSON *v = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
  if (!v) {
    *out = -1;
    return TRUE;
  }
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0 || v->valuedouble > 9007199254740992.0 ||
      v->valuedouble != floor(v->valuedouble))
    return FALSE;
  *out = (gint64)v->valuedouble;
  return TRUE;
}

static int by_gpu(gconstpointer pa, gconstpointer pb) {
  const CalibProfGpuOp *a = pa, *b = pb;
  if (a->start_ns != b->start_ns)
    return a->start_ns < b->start_ns ? -1 : 1;
  if (a->dur_ns != b->dur_ns)
    return a->dur_ns < b->dur_ns ? -1 : 1;
  if (a->stream != b->stream)
    return a->stream < b->stream ? -1 : 1;
  return a->correlation < b->correlation ? -1 : a->correlation > b->correlation;
}

static int by_api(gconstpointer pa, gconstpointer pb) {
  const CalibProfApi *a = pa, *b = pb;
  if (a->tid != b->tid)
    return a->tid < b->tid ? -1 : 1;
  if (a->start_ns != b->start_ns)
    return a->start_ns < b->start_ns ? -1 : 1;
  if (a->dur_ns != b->dur_ns)
    return a->dur_ns < b->dur_ns ? -1 : 1;
  return a->correlation < b->correlation ? -1 : a->correlation > b->correlation;
}

static int by_cpu(gconstpointer pa, gconstpointer pb) {
  const CalibProfCpuOp *a = pa, *b = pb;
  if (a->tid != b->tid)
    return a->tid < b->tid ? -1 : 1;
  if (a->start_ns != b->start_ns)
    return a->start_ns < b->start_ns ? -1 : 1;
  if (a->dur_ns != b->dur_ns)
    return a->dur_ns < b->dur_ns ? -1 : 1;
  return strcmp(a->name, b->name);
}

typedef enum { EV_SKIP, EV_GPU, EV_API, EV_CPU, EV_WINDOW } EvKind;

static EvKind kind_of(const char *cat, CalibProfGpuKind *gk) {
  if (!strcmp(cat, "kernel"))
    *gk = CALIB_PROF_KERNEL;
  else if (!strcmp(cat, "gpu_memset"))
    *gk = CALIB_PROF_MEMSET;
  else if (!strcmp(cat, "gpu_memcpy"))
    *gk = CALIB_PROF_MEMCPY;
  else if (!strcmp(cat, "cuda_runtime") || !strcmp(cat, "cuda_driver"))
    return EV_API;
  else if (!strcmp(cat, "cpu_op"))
    return EV_CPU;
  else if (!strcmp(cat, "Trace"))
    return EV_WINDOW;
  else
    return EV_SKIP;
  return EV_GPU;
}

/* The events of `root`, checked and sorted into `t`. */
static gboolean take_events(CalibProfTrace *t, const cJSON *root, const char *label, GError **error) {
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  if (!events)
    return fail(error, label, "no \"traceEvents\"; it is not a Chrome trace (export_chrome_trace writes one)");
  if (!cJSON_IsArray(events))
    return fail(error, label, "\"traceEvents\" is not a list of events");
  const cJSON *props = cJSON_GetObjectItemCaseSensitive(root, "deviceProperties");
  const cJSON *dev0 = cJSON_IsArray(props) ? cJSON_GetArrayItem(props, 0) : NULL;
  const cJSON *devname = dev0 ? cJSON_GetObjectItemCaseSensitive(dev0, "name") : NULL;
  if (cJSON_IsString(devname))
    t->device = ptd_echo(devname->valuestring, 80, TRUE);
  guint i = 0;
  const cJSON *ev;
  cJSON_ArrayForEach(ev, events) {
    if (++i > CALIB_PROF_MAX_EVENTS)
      return fail(error, label, "more than %u events; profile one step (torch.profiler's schedule) and try again",
                  CALIB_PROF_MAX_EVENTS);
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(ev, "cat");
    CalibProfGpuKind gk = CALIB_PROF_KERNEL;
    EvKind k = cJSON_IsString(cat) ? kind_of(cat->valuestring, &gk) : EV_SKIP;
    const cJSON *ph = cJSON_GetObjectItemCaseSensitive(ev, "ph");
    if (k == EV_SKIP || (cJSON_IsString(ph) && strcmp(ph->valuestring, "X") != 0))
      continue;
    gint64 ts = 0, dur = 0;
    if (!time_ns(ev, "ts", MAX_TS_US, &ts) || !time_ns(ev, "dur", MAX_DUR_US, &dur))
      return fail(error, label,
                  "event %u (%s) has no \"ts\" and \"dur\" that are finite numbers of microseconds (\"ts\" from 0 "
                  "to %g, \"dur\" from 0 to %g)",
                  i, cat->valuestring, MAX_TS_US, MAX_DUR_US);
    if (k == EV_WINDOW) {
      if (!t->has_window || ts < t->window_start_ns) {
        t->has_window = TRUE;
        t->window_start_ns = ts;
        t->window_dur_ns = dur;
      }
      continue;
    }
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
    if (!cJSON_IsString(name))
      return fail(error, label, "event %u (%s) has no \"name\" string", i, cat->valuestring);
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
    if (args && !cJSON_IsObject(args))
      return fail(error, label, "event %u (%s): \"args\" is not an object", i, cat->valuestring);
    gint64 corr = -1;
    if (k != EV_CPU && !id_of(args, "correlation", &corr))
      return fail(error, label, "event %u (%s): \"args.correlation\" is not a whole number from 0 to 2^53", i,
                  cat->valuestring);
    gint64 ext = -1;
    if (k != EV_GPU && !id_of(args, "External id", &ext))
      return fail(error, label, "event %u (%s): \"args.External id\" is not a whole number from 0 to 2^53", i,
                  cat->valuestring);
    const char *nm = g_string_chunk_insert_const(t->names, name->valuestring);
    if (k == EV_GPU) {
      gint64 stream = -1;
      if (!id_of(args, "stream", &stream) || stream < 0)
        return fail(error, label, "event %u (%s) has no \"args.stream\" that is a whole number", i, cat->valuestring);
      CalibProfGpuOp op = {gk, stream, ts, dur, nm, corr, -1};
      g_array_append_val(t->gpu, op);
    } else {
      const cJSON *tid = cJSON_GetObjectItemCaseSensitive(ev, "tid");
      gint64 th = -1;
      if (!tid || !id_of(ev, "tid", &th))
        return fail(error, label, "event %u (%s) has no \"tid\" that is a whole number", i, cat->valuestring);
      if (k == EV_API) {
        CalibProfApi a = {th, ts, dur, nm, corr, ext, FALSE};
        g_array_append_val(t->api, a);
      } else {
        CalibProfCpuOp c = {th, ts, dur, nm, ext};
        g_array_append_val(t->cpu, c);
      }
    }
  }
  if (t->gpu->len == 0)
    return fail(error, label,
                "no GPU operation (kernel, gpu_memset or gpu_memcpy event); profile with "
                "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]");
  g_array_sort(t->gpu, by_gpu);
  g_array_sort(t->api, by_api);
  g_array_sort(t->cpu, by_cpu);
  /* correlation ids: one launch each, one GPU op each, and every GPU op's
   * launch present where the trace records launches at all */
  GHashTable *launch = g_hash_table_new(g_int64_hash, g_int64_equal);
  gboolean ok = TRUE;
  for (guint j = 0; ok && j < t->api->len; j++) {
    CalibProfApi *a = &g_array_index(t->api, CalibProfApi, j);
    if (a->correlation < 0)
      continue;
    if (g_hash_table_contains(launch, &a->correlation))
      ok = fail(error, label, "correlation id %" G_GINT64_FORMAT " is on two CUDA calls; a trace has each once",
                a->correlation);
    else
      g_hash_table_insert(launch, &a->correlation, GUINT_TO_POINTER(j + 1));
  }
  GHashTable *seen = g_hash_table_new(g_int64_hash, g_int64_equal);
  for (guint j = 0; ok && j < t->gpu->len; j++) {
    CalibProfGpuOp *g = &g_array_index(t->gpu, CalibProfGpuOp, j);
    if (g->correlation < 0)
      continue;
    guint at = GPOINTER_TO_UINT(g_hash_table_lookup(launch, &g->correlation));
    /* a CUDA graph's launch is the one call whose kernels share its id */
    gboolean graph = at && strstr(g_array_index(t->api, CalibProfApi, at - 1).name, "GraphLaunch");
    if (!g_hash_table_add(seen, &g->correlation) && !graph) {
      ok = fail(error, label,
                "correlation id %" G_GINT64_FORMAT " is on two GPU operations; a trace has each once (only a CUDA "
                "graph's launch has several)",
                g->correlation);
      break;
    }
    if (at) {
      g->launch = (gint)(at - 1);
      g_array_index(t->api, CalibProfApi, at - 1).launched = TRUE;
    } else if (t->api->len) {
      char *name = ptd_echo(g->name, PTD_ECHO_MAX, FALSE); /* the trace's bytes: one line whatever they hold */
      ok = fail(error, label,
                "the %s '%s' (correlation id %" G_GINT64_FORMAT ") has no CUDA call that launched it; the trace "
                "records launches, so one is missing (a damaged or filtered trace?)",
                calib_prof_gpu_kind_name(g->kind), name, g->correlation);
      g_free(name);
    }
  }
  g_hash_table_destroy(seen);
  g_hash_table_destroy(launch);
  return ok;
}

CalibProfTrace *calib_prof_parse(const char *text, gsize len, const char *label, GError **error) {
  const char *bad_utf8 = NULL;
  if (!g_utf8_validate(text, (gssize)len, &bad_utf8)) {
    fail(error, label, "invalid UTF-8 at byte %zu; JSON text is UTF-8", (gsize)(bad_utf8 - text));
    return NULL;
  }
  char *where = g_strdup_printf("profiler trace '%s'", label);
  cJSON *root = ptd_json_parse(text, len, where, error);
  g_free(where);
  if (!root) {
    if (error && *error) {
      (*error)->domain = CALIB_ERROR;
      (*error)->code = CALIB_ERROR_INVALID;
    }
    return NULL;
  }
  CalibProfTrace *t = g_new0(CalibProfTrace, 1);
  t->path = g_strdup(label);
  t->gpu = g_array_new(FALSE, FALSE, sizeof(CalibProfGpuOp));
  t->api = g_array_new(FALSE, FALSE, sizeof(CalibProfApi));
  t->cpu = g_array_new(FALSE, FALSE, sizeof(CalibProfCpuOp));
  t->names = g_string_chunk_new(4096);
  gboolean ok = take_events(t, root, label, error);
  cJSON_Delete(root);
  if (!ok) {
    calib_prof_free(t);
    return NULL;
  }
  return t;
}

CalibProfTrace *calib_prof_load(const char *path, GError **error) {
  GByteArray *bytes = g_byte_array_new();
  GError *local = NULL;
  char *sha256 = NULL;
  if (!ptd_read_json_text(path, CALIB_PROF_MAX_BYTES, "a trace", "profile one step and try again", bytes, &sha256,
                          &local)) {
    fail(error, path, "%s", local->message);
    g_error_free(local);
    g_byte_array_free(bytes, TRUE);
    return NULL;
  }
  if (bytes->len == 0) {
    fail(error, path, "the file is empty");
    g_byte_array_free(bytes, TRUE);
    g_free(sha256);
    return NULL;
  }
  guint8 nul = 0;
  g_byte_array_append(bytes, &nul, 1);
  CalibProfTrace *t = calib_prof_parse((const char *)bytes->data, bytes->len - 1, path, error);
  g_byte_array_free(bytes, TRUE);
  if (t)
    t->sha256 = sha256;
  else
    g_free(sha256);
  return t;
}
