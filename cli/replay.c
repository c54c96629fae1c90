/* ptdsim replay: a torch.profiler trace's step replayed on the engine, as
 * measured or under a what-if (replay/replay.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../base/outfile.h"
#include "../replay/replay.h"
#include "cli.h"

/* The device the shipped traces were taken on, the source of re-pricing
 * unless --source-profile says otherwise. */
#define DEFAULT_SOURCE "h100-sxm5-80gb-measured"

static double at(const cJSON *o, const char *key) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* The report for people, from the JSON (so both say the same). */
static char *replay_text(const cJSON *j) {
  GString *s = g_string_new(NULL);
  const cJSON *src = cJSON_GetObjectItemCaseSensitive(j, "source");
  const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "graph");
  const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "what_if");
  const cJSON *rep = cJSON_GetObjectItemCaseSensitive(j, "replay");
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(src, "device");
  g_string_append_printf(s, "replay of %s%s%s%s\n", cJSON_GetObjectItemCaseSensitive(src, "file")->valuestring,
                         cJSON_IsString(dev) ? " (" : "", cJSON_IsString(dev) ? dev->valuestring : "",
                         cJSON_IsString(dev) ? ")" : "");
  g_string_append_printf(s, "  replayed: %s\n", cJSON_GetObjectItemCaseSensitive(g, "replayed")->valuestring);
  const cJSON *line;
  cJSON_ArrayForEach(line, cJSON_GetObjectItemCaseSensitive(w, "said")) {
    g_string_append_printf(s, "  what-if:  %s\n", line->valuestring);
  }
  const cJSON *prof = cJSON_GetObjectItemCaseSensitive(w, "profile");
  if (cJSON_IsObject(prof)) {
    const cJSON *ratios = cJSON_GetObjectItemCaseSensitive(prof, "time_ratios"), *r;
    g_string_append(s, "            time x");
    cJSON_ArrayForEach(r, ratios) {
      g_string_append_printf(s, "  %s %.4f (%u ops)", r->string, at(r, "ratio"), (guint)at(r, "ops"));
    }
    g_string_append(s, "\n");
  }
  g_string_append(s, "\n");
  double step = at(rep, "step_us"), span = at(src, "span_us");
  g_string_append_printf(s, "  replayed step     %10.3f ms  %+.2f%% against the span the trace covers\n", step / 1e3,
                         span > 0 ? 100 * (step / span - 1) : 0.0);
  g_string_append_printf(s, "  trace span        %10.3f ms  its first replayed call's start to its last call's or "
                            "GPU op's end\n", span / 1e3);
  g_string_append_printf(s, "  trace GPU span    %10.3f ms  busy %.3f ms\n", at(src, "gpu_span_us") / 1e3,
                         at(src, "gpu_busy_us") / 1e3);
  g_string_append_printf(s, "  GPU busy          %10.3f ms  %5.1f%% of the replayed step\n", at(rep, "gpu_busy_us") / 1e3,
                         100 * at(rep, "gpu_busy_share"));
  g_string_append_printf(s, "  GPU idle          %10.3f ms\n", at(rep, "gpu_idle_us") / 1e3);
  g_string_append_printf(s, "  host calls        %10.3f ms  and %.3f ms of host time between them, over %u thread%s\n",
                         at(rep, "host_call_us") / 1e3, at(rep, "host_gap_us") / 1e3, (guint)at(g, "host_threads"),
                         at(g, "host_threads") == 1 ? "" : "s");
  g_string_append_printf(s, "  graph             %10u ops  %u synchronizations, %u stream waits, %u waits between "
                            "threads\n\n",
                         (guint)at(g, "ops"), (guint)(at(g, "synchronizations") + at(g, "blocking_copies")),
                         (guint)at(g, "stream_waits"), (guint)at(g, "thread_deps"));
  g_string_append_printf(s, "  %-20s %6s %12s %12s\n", "class", "ops", "trace ms", "replay ms");
  const cJSON *c;
  cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "classes")) {
    g_string_append_printf(s, "  %-20s %6u %12.3f %12.3f\n", cJSON_GetObjectItemCaseSensitive(c, "class")->valuestring,
                           (guint)at(c, "ops"), at(c, "trace_us") / 1e3, at(c, "replay_us") / 1e3);
  }
  return g_string_free(s, FALSE);
}

typedef struct {
  char *output, *format, *profile, *source, *trace;
  gboolean cuda_graphs;
} ReplayCli;

static gboolean replay(const ReplayCli *o, const char *path, GError **error) {
  CliFormat format = CLI_TEXT;
  if (o->format && !cli_format(o->format, &format, error))
    return FALSE;
  if (o->source && !o->profile) {
    g_set_error(error, REPLAY_ERROR, REPLAY_ERROR_INVALID,
                "--source-profile re-prices kernels only with --profile (the GPU to re-price them for)");
    return FALSE;
  }
  ModelProfile *source = NULL, *target = NULL;
  if (o->profile) {
    target = model_profile_load(o->profile, error);
    source = target ? model_profile_load(o->source ? o->source : DEFAULT_SOURCE, error) : NULL;
    if (!source) {
      model_profile_free(target);
      return FALSE;
    }
  }
  CalibProfTrace *t = calib_prof_load(path, error);
  ReplayOptions ro = {o->cuda_graphs, source, target};
  ReplayResult r = {0};
  gboolean ok = t && replay_run(t, &ro, &r, error);
  char *text = NULL;
  if (ok && o->trace) {
    /* the replayed timeline, its report inside */
    cJSON *chrome = replay_chrome_trace(t, &r, replay_json(t, &ro, &r));
    char *body = cJSON_PrintUnformatted(chrome);
    cJSON_Delete(chrome);
    const char *inputs[] = {path, NULL};
    PtdOutFile *out = ptd_out_open(o->trace, "--trace", inputs, error);
    ok = out && ptd_out_write(out, body, strlen(body), error) && ptd_out_write(out, "\n", 1, error) &&
         ptd_out_commit(out, error);
    if (out && !ok)
      ptd_out_abort(out);
    cJSON_free(body);
  }
  if (ok) {
    cJSON *json = replay_json(t, &ro, &r);
    if (format == CLI_JSON) {
      char *body = cJSON_Print(json);
      text = g_strconcat(body, "\n", NULL);
      cJSON_free(body);
    } else
      text = replay_text(json);
    cJSON_Delete(json);
  }
  if (t && r.gpu_start_ns)
    replay_result_clear(&r);
  calib_prof_free(t);
  model_profile_free(source);
  model_profile_free(target);
  if (ok && o->output) {
    const char *inputs[] = {path, NULL};
    PtdOutFile *out = ptd_out_open(o->output, "-o", inputs, error);
    ok = out && ptd_out_write(out, text, strlen(text), error) && ptd_out_commit(out, error);
    if (out && !ok)
      ptd_out_abort(out);
  } else if (ok)
    fputs(text, stdout);
  g_free(text);
  return ok;
}

int cli_replay(int argc, char **argv) {
  ReplayCli o = {0};
  GOptionEntry entries[] = {
      {"cuda-graphs", 0, 0, G_OPTION_ARG_NONE, &o.cuda_graphs,
       "What if the step ran from CUDA graphs: every CUDA call but the synchronizing ones costs nothing, and so does "
       "the host time before it",
       NULL},
      {"profile", 0, 0, G_OPTION_ARG_STRING, &o.profile,
       "What if the step ran on this GPU: kernels re-priced by class (GEMMs and attention by dense rate, memory-bound "
       "kernels by HBM bandwidth), " PTD_NAME_OR_PATH_HELP,
       "NAME|FILE"},
      {"source-profile", 0, 0, G_OPTION_ARG_STRING, &o.source,
       "With --profile: the GPU the trace was taken on (default " DEFAULT_SOURCE ")", "NAME|FILE"},
      {"trace", 0, 0, G_OPTION_ARG_FILENAME, &o.trace,
       "Also write the replayed timeline here as a Chrome trace (Perfetto opens it; ptdsim replay reads it back)",
       "FILE"},
      {"format", 0, 0, G_OPTION_ARG_STRING, &o.format, "text (default) or json", "FMT"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &o.output, "Write the report here instead of standard output", "FILE"},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "TRACE.json[.gz]");
  g_option_context_set_summary(
      args.ctx,
      "Replays one step of a torch.profiler trace (export_chrome_trace's JSON, plain or gzip) on ptdsim's\n"
      "engine: its host threads' CUDA calls and the host time between them, every kernel, memset and memcpy\n"
      "on its stream after its launch, the synchronizations; prints the replayed step time beside the span\n"
      "the trace covers, GPU busy and idle, and GPU time by class of kernel, as measured or under a what-if\n"
      "(doc/traces.md).\n\n"
      "Examples:\n  ptdsim replay step.json.gz\n  ptdsim replay step.json.gz --cuda-graphs\n"
      "  ptdsim replay step.json.gz --profile h200-sxm-141gb-measured --format json");
  cli_args_add(&args, entries);
  GError *error = NULL;
  gboolean ok = cli_args_parse(&args, &argc, &argv, &error);
  if (ok && argc != 2) {
    g_set_error(&error, REPLAY_ERROR, REPLAY_ERROR_INVALID,
                argc < 2 ? "give the trace: ptdsim replay TRACE.json[.gz] [--cuda-graphs] [--profile GPU]"
                         : "give one trace: ptdsim replay TRACE.json[.gz] [--cuda-graphs] [--profile GPU]");
    ok = FALSE;
  }
  if (ok)
    ok = replay(&o, argv[1], &error);
  int code = ok ? 0 : cli_fail(error);
  g_free(o.output);
  g_free(o.format);
  g_free(o.profile);
  g_free(o.source);
  g_free(o.trace);
  cli_args_clear(&args);
  return code;
}
