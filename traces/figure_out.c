/* ptdsim — what a figure produces, and its files (see figures.h). */
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/jsonutil.h"
#include "../base/outfile.h"
#include "figures.h"

void trace_figure_out_init(TraceFigureOut *out, const char *figure_name) {
  memset(out, 0, sizeof *out);
  out->json = cJSON_CreateObject();
  cJSON_AddStringToObject(out->json, "figure", figure_name);
  out->rows = cJSON_AddArrayToObject(out->json, "rows");
  out->text = g_string_new(NULL);
}

void trace_figure_out_clear(TraceFigureOut *out) {
  cJSON_Delete(out->json);
  if (out->text)
    g_string_free(out->text, TRUE);
  trace_plot_free(out->plot);
  trace_gantt_free(out->gantt);
  memset(out, 0, sizeof *out);
}

/* --- reading run JSON --- */

static const cJSON *at_path(const cJSON *o, const char *path) {
  char **parts = g_strsplit(path, ".", -1);
  for (guint i = 0; parts[i] && o; i++)
    o = cJSON_GetObjectItemCaseSensitive(o, parts[i]);
  g_strfreev(parts);
  return o;
}

double trace_num_or_nan(const cJSON *o, const char *path) {
  const cJSON *v = at_path(o, path);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

double trace_num(const cJSON *o, const char *path) {
  double v = trace_num_or_nan(o, path);
  return isnan(v) ? 0.0 : v;
}

void trace_row_copy(cJSON *row, const cJSON *run, const char *path, const char *as) {
  const char *last = strrchr(path, '.');
  const cJSON *v = at_path(run, path);
  const char *key = as ? as : last ? last + 1 : path;
  if (cJSON_IsNumber(v))
    cJSON_AddNumberToObject(row, key, v->valuedouble);
  else if (v)
    cJSON_AddItemToObject(row, key, cJSON_Duplicate(v, TRUE));
  else
    cJSON_AddNullToObject(row, key);
}

/* --- CSV --- */

void trace_csv_text(GString *s, const char *text) {
  if (!strpbrk(text, ",\"\n\r")) {
    g_string_append(s, text);
    return;
  }
  g_string_append_c(s, '"');
  for (const char *c = text; *c; c++) {
    if (*c == '"')
      g_string_append_c(s, '"');
    g_string_append_c(s, *c);
  }
  g_string_append_c(s, '"');
}

void trace_csv_cell(GString *s, const cJSON *v) {
  if (!v || cJSON_IsNull(v))
    return;
  if (cJSON_IsNumber(v))
    ptd_append_exact_number(s, v->valuedouble);
  else if (cJSON_IsBool(v))
    g_string_append(s, cJSON_IsTrue(v) ? "true" : "false");
  else if (cJSON_IsString(v))
    trace_csv_text(s, v->valuestring);
  else {
    char *json = cJSON_PrintUnformatted(v);
    trace_csv_text(s, json);
    cJSON_free(json);
  }
}

/* Collects the dotted names of `o`'s leaves (objects flattened) in order. */
static void collect(const cJSON *o, const char *prefix, GPtrArray *names, GHashTable *seen) {
  const cJSON *c;
  cJSON_ArrayForEach(c, o) {
    char *name = prefix ? g_strdup_printf("%s.%s", prefix, c->string) : g_strdup(c->string);
    if (cJSON_IsObject(c))
      collect(c, name, names, seen);
    else if (!g_hash_table_contains(seen, name)) {
      g_hash_table_add(seen, name);
      g_ptr_array_add(names, name);
      continue; /* owned by the table */
    }
    g_free(name);
  }
}

char *trace_figure_csv(const cJSON *rows) {
  GPtrArray *names = g_ptr_array_new();
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  const cJSON *row;
  cJSON_ArrayForEach(row, rows) collect(row, NULL, names, seen);
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < names->len; i++) {
    if (i)
      g_string_append_c(s, ',');
    trace_csv_text(s, g_ptr_array_index(names, i));
  }
  g_string_append_c(s, '\n');
  cJSON_ArrayForEach(row, rows) {
    for (guint i = 0; i < names->len; i++) {
      if (i)
        g_string_append_c(s, ',');
      trace_csv_cell(s, at_path(row, g_ptr_array_index(names, i)));
    }
    g_string_append_c(s, '\n');
  }
  g_ptr_array_free(names, TRUE);
  g_hash_table_destroy(seen);
  return g_string_free(s, FALSE);
}

/* --- files --- */

/* Adds dir/file, written to its temporary file, to `pending` (PtdOutFile *). */
static gboolean write_tmp(GPtrArray *pending, const char *dir, const char *file, const void *data, gsize len,
                          GError **error) {
  char *path = g_build_filename(dir, file, NULL);
  PtdOutFile *f = ptd_out_open(path, "figure file", NULL, error);
  g_free(path);
  if (!f)
    return FALSE;
  g_ptr_array_add(pending, f);
  return ptd_out_write(f, data, len, error);
}

static gboolean write_bytes(GPtrArray *pending, const char *dir, const char *file, GBytes *bytes, GError **error) {
  if (!bytes) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOMEM, "cannot draw '%s' (cairo ran out of memory)", file);
    return FALSE;
  }
  gsize len;
  const void *data = g_bytes_get_data(bytes, &len);
  gboolean ok = write_tmp(pending, dir, file, data, len, error);
  g_bytes_unref(bytes);
  return ok;
}

gboolean trace_figure_write(const TraceFigureOut *out, const char *name, const char *dir, char ***written,
                            GError **error) {
  *written = NULL;
  if (g_file_test(dir, G_FILE_TEST_EXISTS) && !g_file_test(dir, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_NOTDIR, "-o '%s' is a file; give a directory for the figures", dir);
    return FALSE;
  }
  if (g_mkdir_with_parents(dir, 0777) != 0) {
    g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errno),
                "cannot create the directory '%s': %s; give -o a writable place", dir, g_strerror(errno));
    return FALSE;
  }
  GPtrArray *pending = g_ptr_array_new();
  cJSON *exact = cJSON_Duplicate(out->json, TRUE);
  ptd_json_exact_numbers(exact);
  char *json = cJSON_Print(exact), *csv = trace_figure_csv(out->rows);
  cJSON_Delete(exact);
  char *json_nl = g_strconcat(json, "\n", NULL);
  cJSON_free(json);
  char *f_json = g_strconcat(name, ".json", NULL), *f_csv = g_strconcat(name, ".csv", NULL);
  char *f_svg = g_strconcat(name, ".svg", NULL), *f_png = g_strconcat(name, ".png", NULL);
  gboolean ok = write_tmp(pending, dir, f_json, json_nl, strlen(json_nl), error) &&
                write_tmp(pending, dir, f_csv, csv, strlen(csv), error);
  if (ok && out->plot)
    ok = write_bytes(pending, dir, f_svg, trace_plot_svg(out->plot), error) &&
         write_bytes(pending, dir, f_png, trace_plot_png(out->plot), error);
  else if (ok && out->gantt)
    ok = write_bytes(pending, dir, f_svg, trace_gantt_svg(out->gantt), error) &&
         write_bytes(pending, dir, f_png, trace_gantt_png(out->gantt), error);
  GPtrArray *paths = g_ptr_array_new();
  for (guint i = 0; i < pending->len; i++) {
    PtdOutFile *f = g_ptr_array_index(pending, i);
    char *path = g_strdup(ptd_out_path(f));
    if (ok)
      ok = ptd_out_commit(f, error);
    else
      ptd_out_abort(f);
    if (ok)
      g_ptr_array_add(paths, path);
    else
      g_free(path);
  }
  g_ptr_array_free(pending, TRUE);
  g_ptr_array_add(paths, NULL);
  char **list = (char **)g_ptr_array_free(paths, FALSE);
  if (ok)
    *written = list;
  else
    g_strfreev(list);
  g_free(json_nl);
  g_free(csv);
  g_free(f_json);
  g_free(f_csv);
  g_free(f_svg);
  g_free(f_png);
  return ok;
}
