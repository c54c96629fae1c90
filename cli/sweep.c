/* ptdsim sweep — a grid of configurations, one row each, on every core. */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../base/text.h"
#include "../search/pool.h"
#include "../search/keys.h"
#include "../search/sweep.h"
#include "../base/outfile.h"
#include "cli.h"
#include "sweep_mpi.h"

/* --- the command line: options become the grid's columns in order --- */

typedef struct {
  SearchGrid *grid;
  GPtrArray *help; /* help texts made for GOption, freed with the parse */
} Parse;

static gboolean grid_option(const char *option_name, const char *value, gpointer data, GError **error) {
  Parse *p = data;
  const char *name = g_str_has_prefix(option_name, "--") ? option_name + 2 : option_name;
  if (strcmp(name, "set") == 0)
    return search_grid_add_set(p->grid, value, error);
  if (strcmp(name, "zip") == 0)
    return search_grid_add_zip(p->grid, value, error);
  if (strcmp(name, "file") == 0)
    return search_grid_add_file(p->grid, value, error);
  gint id = search_option_find(name);
  g_return_val_if_fail(id >= 0, FALSE);
  return search_grid_add_option(p->grid, (SearchOptId)id, value, error);
}

static gpointer as_data(GOptionArgFunc f) {
  union {
    GOptionArgFunc f;
    gpointer p;
  } u = {.f = f}; /* GOption keeps the callback as data */
  return u.p;
}

static void add_grid_options(CliArgs *a, Parse *p) {
  GOptionEntry entries[SEARCH_N_OPTIONS + 4];
  memset(entries, 0, sizeof entries);
  for (guint i = 0; i < SEARCH_N_OPTIONS; i++) {
    const SearchOption *o = search_option((SearchOptId)i);
    char *help = NULL;
    if (o->kind == SEARCH_OPT_FLAG)
      help = g_strdup_printf("%s (--%s=true,false sweeps both)", o->help, o->name);
    else if (o->words)
      help = g_strdup_printf("%s; a list, or all", o->help);
    entries[i] = (GOptionEntry){o->name, 0, o->kind == SEARCH_OPT_FLAG ? G_OPTION_FLAG_OPTIONAL_ARG : 0,
                                G_OPTION_ARG_CALLBACK, as_data(grid_option), help ? help : o->help,
                                o->kind == SEARCH_OPT_FLAG ? "BOOLS" : o->kind == SEARCH_OPT_COUNT ? "VALUES" : o->metavar};
    if (help) /* GOption keeps the pointer */
      g_ptr_array_add(p->help, help);
  }
  entries[SEARCH_N_OPTIONS] = (GOptionEntry){
      "set", 0, 0, G_OPTION_ARG_CALLBACK, as_data(grid_option),
      "Override a number of the cluster or profile file by its JSON path, with one value or many: "
      "cluster.network.nic_GBps=24,48, profile.peak_tflops=312..624x2 (repeatable)",
      "KEY=VALUES"};
  entries[SEARCH_N_OPTIONS + 1] =
      (GOptionEntry){"zip", 0, 0, G_OPTION_ARG_CALLBACK, as_data(grid_option),
                     "Vary these columns together, value k with value k, instead of all their combinations: tp,pp "
                     "(repeatable)",
                     "A,B,..."};
  entries[SEARCH_N_OPTIONS + 2] =
      (GOptionEntry){"file", 0, 0, G_OPTION_ARG_CALLBACK, as_data(grid_option),
                     "Read options, sets and zips from a sweep file (JSON: {\"options\": {...}, \"set\": {...}, "
                     "\"zip\": [[...]]}), in its place among the options",
                     "FILE"};
  GOptionGroup *g = g_option_group_new("grid", "Grid options", "Show the grid options", p, NULL);
  cli_args_add_group(a, g, entries);
  g_option_context_set_main_group(a->ctx, g);
  cli_args_repeatable(a, "set");
  cli_args_repeatable(a, "zip");
}

/* --- writing rows --- */

/* A thread that syncs the output file half a second after rows were
 * written, whatever the sweep does meanwhile. */
typedef struct {
  int fd;
  GMutex lock;
  GCond wake;
  gboolean dirty, done;
  GThread *thread;
} Syncer;

typedef struct {
  const SearchGrid *grid;
  SearchSweepFormat format;
  Syncer *syncer;   /* NULL: stdout, not synced */
  int fd;           /* output */
  const char *path; /* NULL: stdout */
  guint64 total, written, skipped;
  guint64 count[SEARCH_SWEEP_N_STATUS];
  gint64 t0, last_progress;
  gboolean progress; /* stderr is a terminal */
  gboolean failed;
  int write_errno;
  /* The version and inputs (sweep_meta), with its newline: a JSONL
   * file's first line; a CSV file's sidecar (sidecar, PATH.inputs.json, in
   * the JSONL form), or its first line in files an older ptdsim wrote
   * (meta_format CSV) */
  char *meta;
  SearchSweepFormat meta_format;
  char *sidecar;             /* NULL: the meta is in the file itself */
  gboolean sidecar_written;  /* this run wrote it (removed with a new file that got no row) */
} Out;

static gboolean write_all(int fd, const char *data, gsize len) {
  while (len > 0) {
    gssize n = write(fd, data, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return FALSE;
    data += n;
    len -= (gsize)n;
  }
  return TRUE;
}

/* Rows reach the disk at most half a second after they are written: one
 * fdatasync for whatever was written meanwhile. */
#define SYNC_EVERY_US 500000

static gpointer syncer_main(gpointer data) {
  Syncer *s = data;
  g_mutex_lock(&s->lock);
  while (!s->done) {
    gint64 until = g_get_monotonic_time() + SYNC_EVERY_US;
    while (!s->done && g_cond_wait_until(&s->wake, &s->lock, until))
      ;
    if (s->dirty) {
      s->dirty = FALSE;
      g_mutex_unlock(&s->lock);
      fdatasync(s->fd);
      g_mutex_lock(&s->lock);
    }
  }
  g_mutex_unlock(&s->lock);
  return NULL;
}

static Syncer *syncer_start(int fd) {
  Syncer *s = g_new0(Syncer, 1);
  s->fd = fd;
  g_mutex_init(&s->lock);
  g_cond_init(&s->wake);
  s->thread = g_thread_new("sync", syncer_main, s);
  return s;
}

/* Stops the thread and syncs what is left. */
static void syncer_stop(Syncer *s) {
  if (!s)
    return;
  g_mutex_lock(&s->lock);
  s->done = TRUE;
  g_cond_signal(&s->wake);
  g_mutex_unlock(&s->lock);
  g_thread_join(s->thread);
  fdatasync(s->fd);
  g_mutex_clear(&s->lock);
  g_cond_clear(&s->wake);
  g_free(s);
}

static void show_progress(Out *o, gboolean final) {
  gint64 now = g_get_monotonic_time();
  if (!o->progress || (!final && now - o->last_progress < 200000))
    return;
  o->last_progress = now;
  double secs = (now - o->t0) * 1e-6, rate = secs > 0 ? (o->written - o->skipped) / secs : 0;
  guint64 left = o->total - o->written;
  fprintf(stderr, "\rsweep: %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT " rows (%.1f%%), %.1f/s, ETA %.0f s   ",
          o->written, o->total, o->total ? 100.0 * o->written / o->total : 100.0, rate, rate > 0 ? left / rate : 0.0);
  if (final)
    fputc('\n', stderr);
  fflush(stderr);
}

/* One row, in order: written at once (a crash keeps it), synced soon.  A
 * row the file cannot take whole (a full disk, a file size limit) is cut
 * off again, so that the file ends with the last whole row. */
static gboolean put_row(Out *o, const char *row, SearchSweepStatus status) {
  off_t before = o->path ? lseek(o->fd, 0, SEEK_CUR) : -1;
  if (!write_all(o->fd, row, strlen(row))) {
    o->write_errno = errno;
    o->failed = TRUE;
    if (before >= 0 && ftruncate(o->fd, before) == 0)
      (void)lseek(o->fd, before, SEEK_SET);
    return FALSE;
  }
  o->written++;
  o->count[status]++;
  if (o->syncer) {
    g_mutex_lock(&o->syncer->lock);
    o->syncer->dirty = TRUE;
    g_mutex_unlock(&o->syncer->lock);
  }
  show_progress(o, FALSE);
  return TRUE;
}

/* A row made on a worker thread (any rank), for global index k. */
static gpointer make_row(guint k, gpointer user) {
  Out *o = user;
  SweepRow *r = g_new(SweepRow, 1);
  SearchSweepStatus st;
  r->text = search_sweep_row(o->grid, k, o->format, &st);
  r->status = (gint)st;
  return r;
}

/* Rank 0: row k, in order. */
static gboolean take_row(guint64 k, SweepRow *r, gpointer user) {
  (void)k;
  gboolean ok = put_row(user, r->text, (SearchSweepStatus)r->status);
  sweep_row_free(r);
  return ok;
}

/* --- resuming --- */

/* The version of ptdsim that wrote an output file and the files its
 * machines were made of ("ptdsim 0.1.0 sweep; inputs: cluster selene.json
 * sha256 ..."), as {"ptdsim_sweep": ...} (a JSONL file's first line, a CSV
 * file's sidecar) or "# ..." (a CSV file's first line as an older ptdsim
 * wrote it), so that --resume never mixes two versions' or two inputs'
 * results. */
static char *sweep_meta(const SearchGrid *g, SearchSweepFormat f) {
  char *inputs = search_grid_inputs(g);
  char *text = g_strdup_printf("ptdsim %s sweep; inputs: %s", PTDSIM_VERSION, inputs);
  char *line;
  if (f == SEARCH_SWEEP_CSV)
    line = g_strdup_printf("# %s\n", text);
  else {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "ptdsim_sweep", text);
    char *json = cJSON_PrintUnformatted(o);
    line = g_strdup_printf("%s\n", json);
    cJSON_free(json);
    cJSON_Delete(o);
  }
  g_free(inputs);
  g_free(text);
  return line;
}

/* The text of a first line (without its newline), or NULL if it is none. */
static char *meta_text(const char *line, SearchSweepFormat f) {
  if (f == SEARCH_SWEEP_CSV)
    return g_str_has_prefix(line, "# ptdsim ") ? g_strdup(line + 2) : NULL;
  cJSON *o = cJSON_Parse(line);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "ptdsim_sweep");
  char *text = cJSON_IsString(t) ? g_strdup(t->valuestring) : NULL;
  cJSON_Delete(o);
  return text;
}

/* The first line of the file against this sweep's: the same version, and
 * every input it records among this sweep's, unchanged (a sweep extended
 * with more values may have more). */
static gboolean check_meta(const Out *o, const char *line, GError **error) {
  char *theirs = meta_text(line, o->meta_format), *ours_line = g_strndup(o->meta, strlen(o->meta) - 1);
  char *ours = meta_text(ours_line, o->meta_format);
  gboolean ok = TRUE;
  if (!theirs) {
    g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC,
                "--resume: %s does not begin with the line ptdsim sweep -o writes (its version and inputs); it was "
                "not written by this ptdsim: start a new file with another -o",
                o->path);
    ok = FALSE;
  }
  const char *tv = theirs ? strstr(theirs, " sweep; inputs: ") : NULL, *ov = strstr(ours, " sweep; inputs: ");
  if (ok && (!tv || tv - theirs != ov - ours || strncmp(theirs, ours, (gsize)(ov - ours)) != 0)) {
    char *echo = ptd_echo(theirs, 60, FALSE);
    g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC,
                "--resume: %s was written by %.*s, this is ptdsim %s: its rows would mix two versions' results; start "
                "a new file with another -o",
                o->path, tv ? (int)(tv - theirs) : (int)strlen(echo), tv ? theirs : echo, PTDSIM_VERSION);
    g_free(echo);
    ok = FALSE;
  }
  if (ok) {
    char **want = g_strsplit(tv + strlen(" sweep; inputs: "), ", ", -1);
    char **have = g_strsplit(ov + strlen(" sweep; inputs: "), ", ", -1);
    for (guint i = 0; ok && want[i]; i++)
      if (*want[i] && !g_strv_contains((const char *const *)have, want[i])) {
        char *echo = ptd_echo(want[i], PTD_ECHO_MAX, FALSE);
        g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC,
                    "--resume: %s was made with %s, which this sweep does not use or which has changed since; start "
                    "a new file with another -o",
                    o->path, echo);
        g_free(echo);
        ok = FALSE;
      }
    g_strfreev(want);
    g_strfreev(have);
  }
  g_free(theirs);
  g_free(ours);
  g_free(ours_line);
  return ok;
}

/* Kept rows simulated again, and compared byte for byte: the first, the
 * middle and the last (a row edited by hand, or computed otherwise, is
 * not carried into the final file). */
#define RECHECK_ROWS 3

static gboolean recheck(const Out *o, const char *text, const gsize *starts, guint64 k, GError **error) {
  guint64 pick[RECHECK_ROWS] = {0, k / 2, k ? k - 1 : 0};
  for (guint i = 0; i < RECHECK_ROWS && k > 0; i++) {
    if (i > 0 && pick[i] == pick[i - 1])
      continue;
    guint64 r = pick[i];
    SearchSweepStatus st;
    char *again = search_sweep_row(o->grid, r, o->format, &st);
    gsize len = starts[r + 1] - starts[r];
    gboolean same = strlen(again) == len && memcmp(again, text + starts[r], len) == 0;
    g_free(again);
    if (!same) {
      g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC,
                  "--resume: row %" G_GUINT64_FORMAT " of %s is not what this ptdsim computes for it (edited, or "
                  "written on other inputs); start a new file with another -o",
                  r, o->path);
      return FALSE;
    }
  }
  return TRUE;
}

/* Reads the rows already in the output file, checks them against the grid
 * and cuts a last line left incomplete by a crash or power loss.  Returns
 * how many rows are done. */
static gboolean resume(Out *o, GError **error) {
  char *text = NULL;
  gsize len = 0;
  if (!g_file_get_contents(o->path, &text, &len, error))
    return FALSE;
  if (memchr(text, '\0', len)) {
    /* a power loss can leave zeros at the end: keep what precedes them */
    len = strlen(text);
  }
  gsize keep = 0; /* bytes of complete lines */
  char *header = search_sweep_header(o->grid, o->format);
  gboolean ok = TRUE;
  const char *p = text, *end = text + len;
  guint64 k = 0;
  GArray *starts = g_array_new(FALSE, FALSE, sizeof(gsize)); /* of the rows, and past the last */
  if (o->sidecar) { /* a CSV file's version and inputs beside it */
    char *side = NULL;
    gsize side_len = 0;
    if (!g_file_get_contents(o->sidecar, &side, &side_len, NULL) || side_len > (1u << 20) ||
        !memchr(side, '\n', side_len)) {
      g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC,
                  "--resume: %s is not there or not whole (the version and inputs ptdsim sweep -o writes beside a "
                  "CSV file); start a new file with another -o",
                  o->sidecar);
      ok = FALSE;
    } else {
      *strchr(side, '\n') = '\0';
      ok = check_meta(o, side, error);
    }
    g_free(side);
  } else if (len > 0) {
    const char *nl = memchr(p, '\n', (gsize)(end - p));
    char *first = nl ? g_strndup(p, (gsize)(nl - p)) : NULL;
    ok = first ? check_meta(o, first, error) : TRUE; /* an incomplete first line is cut */
    if (ok && nl)
      keep = (gsize)(nl + 1 - text), p = nl + 1;
    else if (!nl)
      p = end;
    g_free(first);
  }
  if (ok && header && p < end) {
    const char *nl = memchr(p, '\n', (gsize)(end - p));
    if (!nl || strncmp(p, header, (gsize)(nl - p + 1)) != 0 || (gsize)(nl - p + 1) != strlen(header)) {
      g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC,
                  "--resume: %s was not written by this sweep (its header has other columns); give the same options "
                  "as the sweep that wrote it, or another -o",
                  o->path);
      ok = FALSE;
    } else
      keep = (gsize)(nl + 1 - text), p = nl + 1;
  }
  while (ok && p < end) {
    const char *nl = memchr(p, '\n', (gsize)(end - p));
    if (!nl)
      break; /* an incomplete last line: cut */
    char *line = g_strndup(p, (gsize)(nl - p));
    SearchSweepStatus st;
    GError *local = NULL;
    if (k >= o->total) {
      g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC,
                  "--resume: %s has more rows than this sweep's %" G_GUINT64_FORMAT "; it was written by another sweep",
                  o->path, o->total);
      ok = FALSE;
    } else if (!search_sweep_check_row(o->grid, o->format, line, k, &st, &local)) {
      g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC,
                  "--resume: %s was written by another sweep: %s; give the same options as that sweep, or another -o",
                  o->path, local->message);
      g_error_free(local);
      ok = FALSE;
    } else {
      o->count[st]++;
      k++;
      gsize at = (gsize)(p - text);
      g_array_append_val(starts, at);
      keep = (gsize)(nl + 1 - text);
      p = nl + 1;
    }
    g_free(line);
  }
  g_array_append_val(starts, keep);
  if (ok)
    ok = recheck(o, text, (const gsize *)starts->data, k, error);
  g_array_free(starts, TRUE);
  g_free(text);
  g_free(header);
  if (!ok)
    return FALSE;
  if (ftruncate(o->fd, (off_t)keep) != 0 || lseek(o->fd, 0, SEEK_END) < 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "--resume: cannot write %s: %s", o->path,
                g_strerror(errno));
    return FALSE;
  }
  /* a file cut before its header: the first line (where it is in the
   * file) and the header again */
  const char *first = o->sidecar ? "" : o->meta;
  if (keep == 0 || (k == 0 && o->format == SEARCH_SWEEP_CSV && keep <= strlen(first))) {
    char *h = search_sweep_header(o->grid, o->format);
    gboolean w = ftruncate(o->fd, 0) == 0 && lseek(o->fd, 0, SEEK_SET) == 0 &&
                 write_all(o->fd, first, strlen(first)) && (!h || write_all(o->fd, h, strlen(h)));
    g_free(h);
    if (!w) {
      g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot write %s: %s", o->path,
                  g_strerror(errno));
      return FALSE;
    }
  }
  o->written = o->skipped = k;
  return TRUE;
}

/* Rank 0: the output (a new file, or the one to resume, checked), and the
 * header of a new one. */
static gboolean open_output(Out *out, const char *output, gboolean do_resume, int *fd, GError **error) {
  if (output && out->format == SEARCH_SWEEP_CSV) {
    /* a CSV file holds its header and rows only (pandas.read_csv opens it
     * as it is); its version and inputs go beside it, but where an older
     * ptdsim's file being resumed begins with them */
    char *side = g_strconcat(output, ".inputs.json", NULL);
    gboolean legacy = FALSE;
    if (do_resume && !g_file_test(side, G_FILE_TEST_EXISTS)) {
      char buf[10] = {0};
      FILE *f = fopen(output, "r");
      legacy = f && fread(buf, 1, 9, f) == 9 && strcmp(buf, "# ptdsim ") == 0;
      if (f)
        fclose(f);
    }
    /* a new file that a crash cut before its sidecar was written holds at
     * most its header: nothing to check it against, so write the sidecar */
    gboolean orphan = FALSE;
    if (do_resume && !legacy && !g_file_test(side, G_FILE_TEST_EXISTS)) {
      char *body = NULL;
      gsize len = 0;
      orphan = g_file_get_contents(output, &body, &len, NULL) &&
               (!memchr(body, '\n', len) || memchr(body, '\n', len) == body + len - 1);
      g_free(body);
    }
    if (legacy)
      g_free(side);
    else {
      if (!do_resume && !g_file_test(output, G_FILE_TEST_EXISTS) && g_file_test(side, G_FILE_TEST_EXISTS)) {
        g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                    "'%s' exists beside -o '%s'; give --resume to continue that sweep, or another name (ptdsim does "
                    "not overwrite it)",
                    side, output);
        g_free(side);
        return FALSE;
      }
      out->sidecar = side;
      g_free(out->meta);
      out->meta = sweep_meta(out->grid, SEARCH_SWEEP_JSONL);
      out->meta_format = SEARCH_SWEEP_JSONL;
      if (orphan) {
        const char *inputs[] = {output, NULL};
        if (!ptd_write_file(side, "the sweep's version and inputs", inputs, out->meta, strlen(out->meta), error))
          return FALSE;
      }
    }
  }
  if (output) {
    if (do_resume) {
      if (!g_file_test(output, G_FILE_TEST_IS_REGULAR)) {
        g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                    "--resume: '%s' is not there (or not a file); drop --resume to start it", output);
        return FALSE;
      }
      *fd = g_open(output, O_RDWR, 0);
    } else {
      if (g_file_test(output, G_FILE_TEST_EXISTS)) {
        g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                    "-o '%s' exists; give --resume to continue that sweep, or another name (ptdsim does not "
                    "overwrite it)",
                    output);
        return FALSE;
      }
      *fd = g_open(output, O_WRONLY | O_CREAT | O_EXCL, 0666);
    }
    if (*fd < 0) {
      g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot write -o '%s': %s", output,
                  g_strerror(errno));
      return FALSE;
    }
    out->fd = *fd;
    if (do_resume)
      return resume(out, error);
  }
  char *header = search_sweep_header(out->grid, out->format);
  gboolean ok = (!output || out->sidecar || write_all(out->fd, out->meta, strlen(out->meta))) &&
                (!header || write_all(out->fd, header, strlen(header)));
  if (!ok)
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno), "cannot write %s: %s",
                output ? output : "stdout", g_strerror(errno));
  g_free(header);
  if (ok && out->sidecar) {
    const char *inputs[] = {output, NULL};
    ok = out->sidecar_written =
        ptd_write_file(out->sidecar, "the sweep's version and inputs", inputs, out->meta, strlen(out->meta), error);
  }
  return ok;
}

/* --list-keys: the numbers of the grid's first cluster and profile (the
 * defaults where it names none, --set values written in) and what each
 * moves (search/keys.h). */
static gboolean print_keys(SearchGrid *g, GError **error) {
  cJSON *cj = NULL, *pj = NULL;
  char *cpath = NULL, *ppath = NULL;
  if (!search_grid_prepare(g, error) || !search_grid_machine_json(g, 0, &cj, &cpath, &pj, &ppath, error))
    return FALSE;
  char *text = search_set_keys_list(cj, cpath, pj, ppath);
  fputs(text, stdout);
  g_free(text);
  cJSON_Delete(cj);
  cJSON_Delete(pj);
  g_free(cpath);
  g_free(ppath);
  return TRUE;
}

/* --- signals: stop starting rows, finish and write those in flight --- */

static volatile gint stop_signal = 0;

static void on_signal(int sig) { g_atomic_int_set(&stop_signal, sig); }

int cli_sweep(int argc, char **argv) {
  Parse parse = {search_grid_new(), g_ptr_array_new_with_free_func(g_free)};
  char *format = NULL, *output = NULL, *jobs_text = NULL;
  gboolean do_resume = FALSE, step_effects = FALSE, list_keys = FALSE;
  GOptionEntry entries[] = {
      {"format", 0, 0, G_OPTION_ARG_STRING, &format, "csv (default) or jsonl", "FMT"},
      {"output", 'o', 0, G_OPTION_ARG_FILENAME, &output,
       "Write the rows to FILE (a new file: every finished row is kept even if the sweep is stopped)", "FILE"},
      {"resume", 0, 0, G_OPTION_ARG_NONE, &do_resume,
       "Continue the sweep that wrote -o FILE: its rows are checked against this grid and kept, the rest run", NULL},
      {"jobs", 'j', 0, G_OPTION_ARG_STRING, &jobs_text, "Threads (default: all cores)", "N"},
      {"step-effects", 0, 0, G_OPTION_ARG_NONE, &step_effects,
       "Also price what the clock, the framework's kernels, the host and the collectives sharing the GPU each add "
       "to every row (step_effects_s, as ptdsim run reports it: up to four more simulations a row)",
       NULL},
      {"list-keys", 0, 0, G_OPTION_ARG_NONE, &list_keys,
       "List every number --set can change in the cluster and profile given (default selene and its GPU), with what "
       "each moves, and stop",
       NULL},
      {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "- simulate every configuration of a grid, one row each");
  g_option_context_set_summary(
      args.ctx,
      "Runs the Cartesian product of the values given to run's options, one row per configuration in grid\n"
      "order (the last option varying fastest): the configuration, its status (ok, out_of_memory, invalid)\n"
      "and reason, and every result of ptdsim run --format json.  Each option takes a value, a list\n"
      "(--tp 1,2,4,8), a range (--micro-batch 1..8, --gpus 64..1024x2 doubling, --global-batch 256..1024+256)\n"
      "or all of a closed set (--schedule all); --slices separates its values with ';'.  The output is the\n"
      "same for any --jobs (and MPI ranks).  Throughput: model_tflops_per_gpu and mfu (the model's FLOPs, no\n"
      "recomputation); tflops_per_gpu is SC21's Eq. 3, the paper's figure where sc21_reproduction is true.\n\n"
      "Examples:\n"
      "  ptdsim sweep --model gpt3-175b --gpus 1024 --global-batch 1536 --tp 4,8 --pp 8..32x2 --micro-batch 1,2\n"
      "  ptdsim sweep --model gpt3-13b --gpus 64 --tp 1 --pp 1 --global-batch 512 --network analytic \\\n"
      "      --set cluster.network.nic_GBps=24,48 -o nics.csv     what if the NICs were twice as fast");
  add_grid_options(&args, &parse);
  cli_args_add(&args, entries);
  GError *error = NULL;
  int code = 0, fd = -1;
  Out out = {0};
  guint jobs = search_pool_cores();
  SearchSweepFormat fmt = SEARCH_SWEEP_CSV;
  SweepMpi *mpi = sweep_mpi_init(&argc, &argv);
  if (!sweep_mpi_usable(mpi)) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "this ptdsim was built without MPI, so under mpirun every rank would run the whole sweep; install "
                "OpenMPI (libopenmpi-dev), rebuild, or run it without mpirun");
    goto fail;
  }
  if (!cli_args_parse(&args, &argc, &argv, &error))
    goto fail;
  if (argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "unexpected argument '%s' (a sweep file goes with --file; see ptdsim sweep --help)", argv[1]);
    goto fail;
  }
  if (format && strcmp(format, "csv") != 0 && strcmp(format, "jsonl") != 0) {
    char *echo = ptd_echo(format, PTD_ECHO_MAX, FALSE);
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "unknown --format '%s'; use csv or jsonl", echo);
    g_free(echo);
    goto fail;
  }
  fmt = format && strcmp(format, "jsonl") == 0 ? SEARCH_SWEEP_JSONL : SEARCH_SWEEP_CSV;
  if (list_keys) {
    if (!print_keys(parse.grid, &error))
      goto fail;
    goto done;
  }
  if (jobs_text && !cli_count("--jobs", jobs_text, 1, 4096, &jobs, &error))
    goto fail;
  if (do_resume && !output) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "--resume continues an output file; give it with -o");
    goto fail;
  }
  search_grid_set_step_effects(parse.grid, step_effects);
  if (!search_grid_prepare(parse.grid, &error))
    goto fail;
  /* what every configuration needs */
  static const struct {
    const char *name, *why;
  } needed[] = {{"gpus", "--gpus"}, {"global-batch", "--global-batch (or --local-batch)"}};
  gboolean have[2] = {FALSE, FALSE}, model = FALSE, shape[3] = {FALSE, FALSE, FALSE};
  for (guint c = 0; c < search_grid_n_columns(parse.grid); c++) {
    const char *col = search_grid_column(parse.grid, c);
    for (guint i = 0; i < 2; i++)
      have[i] |= strcmp(col, needed[i].name) == 0;
    have[1] |= strcmp(col, "local-batch") == 0; /* torchtitan's: the global batch is it times d */
    model |= strcmp(col, "model") == 0;
    shape[0] |= strcmp(col, "layers") == 0;
    shape[1] |= strcmp(col, "hidden") == 0;
    shape[2] |= strcmp(col, "heads") == 0;
  }
  for (guint i = 0; i < 2; i++)
    if (!have[i]) {
      g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "%s is required (one value or many)", needed[i].why);
      goto fail;
    }
  if (!model && !(shape[0] && shape[1] && shape[2])) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                "no model: give --model NAME(S) or all of --layers, --hidden and --heads");
    goto fail;
  }
  out = (Out){.grid = parse.grid, .format = fmt, .fd = STDOUT_FILENO, .path = output,
              .total = search_grid_points(parse.grid), .progress = isatty(STDERR_FILENO) && sweep_mpi_is_writer(mpi),
              .meta = sweep_meta(parse.grid, fmt), .meta_format = fmt};
  gboolean ready = !sweep_mpi_is_writer(mpi) || open_output(&out, output, do_resume, &fd, &error);
  if (!sweep_mpi_agree(mpi, ready, &out.skipped))
    goto fail;
  out.written = out.skipped;
  struct sigaction sa = {0}, old_int, old_term;
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  out.t0 = g_get_monotonic_time();
  if (out.path && sweep_mpi_is_writer(mpi))
    out.syncer = syncer_start(out.fd);
  gboolean complete = sweep_mpi_run(mpi, out.skipped, out.total, jobs, &stop_signal, make_row, take_row, &out);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  syncer_stop(out.syncer);
  out.syncer = NULL;
  show_progress(&out, TRUE);
  if (out.failed) {
    g_set_error(&error, G_FILE_ERROR, g_file_error_from_errno(out.write_errno), "cannot write %s: %s; %" G_GUINT64_FORMAT
                " rows were written (continue with --resume)",
                output ? output : "stdout", g_strerror(out.write_errno), out.written);
    goto fail;
  }
  if (sweep_mpi_is_writer(mpi)) {
    double secs = (g_get_monotonic_time() - out.t0) * 1e-6;
    fprintf(stderr,
            "%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " rows: %" G_GUINT64_FORMAT " ok, %" G_GUINT64_FORMAT
            " out_of_memory, %" G_GUINT64_FORMAT " invalid (%" G_GUINT64_FORMAT " rows in %.1f s, %.1f/s%s)\n",
            out.written, out.total, out.count[SEARCH_SWEEP_OK], out.count[SEARCH_SWEEP_OUT_OF_MEMORY],
            out.count[SEARCH_SWEEP_INVALID], out.written - out.skipped, secs,
            secs > 0 ? (out.written - out.skipped) / secs : 0.0, out.skipped ? ", the rest resumed" : "");
  }
  if (!complete) {
    if (sweep_mpi_is_writer(mpi))
      fprintf(stderr, "ptdsim: stopped by a signal after %" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT
                      " rows; %s\n",
              out.written, out.total,
              output ? "continue with the same command and --resume" : "write to a file with -o to be able to resume");
    code = 128 + (stop_signal ? stop_signal : SIGINT);
  }
  goto done;
fail:
  if (sweep_mpi_is_writer(mpi))
    code = cli_fail(error);
  else {
    g_clear_error(&error);
    code = 1;
  }
  /* a new output file that got no row is not kept */
  if (fd >= 0 && !do_resume && out.written == 0 && output) {
    g_unlink(output);
    if (out.sidecar_written)
      g_unlink(out.sidecar);
  }
done:
  g_free(out.meta);
  g_free(out.sidecar);
  if (fd >= 0)
    close(fd);
  g_free(format);
  g_free(output);
  g_free(jobs_text);
  search_grid_free(parse.grid);
  cli_args_clear(&args);
  g_ptr_array_unref(parse.help);
  sweep_mpi_finish(mpi);
  return code;
}
