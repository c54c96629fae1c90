/* ptdsim — the end-to-end tests' runner and JSON readers (cli_harness.h). */
#include "cli_harness.h"

#include <glib/gstdio.h>
#include <zlib.h>

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

const char *bin;

gboolean cli_harness_init(void) {
  bin = g_getenv("PTDSIM_BIN");
  if (!bin)
    g_printerr("PTDSIM_BIN is not set (meson test sets it)\n");
  return bin != NULL;
}

void proc_clear(Proc *p) {
  g_free(p->out);
  g_free(p->err);
}

Proc run_argv(const char *const *args) {
  GPtrArray *argv = g_ptr_array_new();
  g_ptr_array_add(argv, (gpointer)bin);
  for (guint i = 0; args[i]; i++)
    g_ptr_array_add(argv, (gpointer)args[i]);
  g_ptr_array_add(argv, NULL);
  Proc p = {-1, NULL, NULL};
  int wait_status = 0;
  GError *error = NULL;
  gboolean ok = g_spawn_sync(NULL, (char **)argv->pdata, NULL, G_SPAWN_DEFAULT, NULL, NULL, &p.out, &p.err,
                             &wait_status, &error);
  g_assert_no_error(error);
  g_assert_true(ok);
  g_ptr_array_free(argv, TRUE);
  if (g_spawn_check_wait_status(wait_status, &error))
    p.status = 0;
  else {
    if (error->domain == G_SPAWN_EXIT_ERROR)
      p.status = error->code;
    g_clear_error(&error);
  }
  return p;
}

Proc run_line(const char *args) {
  char **v = g_strsplit(args, " ", -1);
  Proc p = run_argv((const char *const *)v);
  g_strfreev(v);
  return p;
}

cJSON *parse_json(const Proc *p) {
  if (p->status != 0)
    g_test_message("stderr: %s", p->err);
  g_assert_cmpint(p->status, ==, 0);
  cJSON *json = cJSON_Parse(p->out);
  if (!json)
    g_test_message("not JSON: %s", p->out);
  g_assert_nonnull(json);
  return json;
}

cJSON *run_json(const char *args) {
  Proc p = run_line(args);
  if (p.status != 0)
    g_test_message("ptdsim %s: %s", args, p.err);
  cJSON *json = parse_json(&p);
  g_assert_cmpstr(p.err, ==, "");
  proc_clear(&p);
  return json;
}

double num(const cJSON *obj, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsNumber(item))
    g_test_message("key '%s' missing or not a number", key);
  g_assert_true(cJSON_IsNumber(item));
  g_assert_true(isfinite(item->valuedouble));
  return item->valuedouble;
}

const char *str(const cJSON *obj, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsString(item))
    g_test_message("key '%s' missing or not a string", key);
  g_assert_true(cJSON_IsString(item));
  return item->valuestring;
}

const cJSON *obj(const cJSON *parent, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(parent, key);
  if (!cJSON_IsObject(item))
    g_test_message("key '%s' missing or not an object", key);
  g_assert_true(cJSON_IsObject(item));
  return item;
}

const cJSON *arr(const cJSON *obj, const char *key) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!cJSON_IsArray(item))
    g_test_message("key '%s' missing or not an array", key);
  g_assert_true(cJSON_IsArray(item));
  return item;
}

char *slurp(const char *path, gsize *len) {
  char *text = NULL;
  GError *error = NULL;
  g_assert_true(g_file_get_contents(path, &text, len, &error));
  g_assert_no_error(error);
  return text;
}

void assert_one_line_error(const Proc *p, const char *needle) {
  if (!strstr(p->err, needle))
    g_test_message("stderr: %s", p->err);
  g_assert_cmpint(p->status, ==, 1);
  g_assert_cmpstr(p->out, ==, "");
  g_assert_true(g_str_has_prefix(p->err, "ptdsim: "));
  g_assert_nonnull(strchr(p->err, '\n'));
  g_assert_cmpstr(strchr(p->err, '\n') + 1, ==, "");
  g_assert_nonnull(strstr(p->err, needle));
}

Proc run_sh_in(const char *dir, const char *script, guint timeout_s) {
  char *full = g_strdup_printf("T='%s'; export T; %s", dir, script);
  char *limit = g_strdup_printf("%u", timeout_s);
  const char *argv[] = {"timeout", "-s", "KILL", limit, "/bin/sh", "-c", full, NULL};
  Proc p = {-1, NULL, NULL};
  int wait_status = 0;
  GError *error = NULL;
  g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH, NULL, NULL, &p.out, &p.err, &wait_status,
                             &error));
  g_assert_no_error(error);
  if (WIFEXITED(wait_status))
    p.status = WEXITSTATUS(wait_status);
  g_free(full);
  g_free(limit);
  return p;
}

void cli_test_bad(gconstpointer data) {
  const CliBadCase *c = data;
  Proc p = run_line(c->args);
  g_test_message("ptdsim %s -> %d: %s", c->args, p.status, p.err);
  assert_one_line_error(&p, c->mention);
  proc_clear(&p);
}

void run_line_ok(const char *args) {
  Proc p = run_line(args);
  if (p.status != 0)
    g_test_message("ptdsim %s -> %d: %s", args, p.status, p.err);
  g_assert_cmpint(p.status, ==, 0);
  proc_clear(&p);
}

void cli_test_bad_each(const CliBadCase *cases, gsize n) {
  for (gsize i = 0; i < n; i++)
    cli_test_bad(&cases[i]);
}

cJSON *load_shipped(const char *subdir, const char *name) {
  char *file = g_strconcat(name, ".json", NULL);
  char *path = g_build_filename(g_getenv("PTDSIM_DATA_DIR"), subdir, file, NULL);
  char *text = slurp(path, NULL);
  cJSON *j = cJSON_Parse(text);
  g_assert_nonnull(j);
  g_free(text);
  g_free(path);
  g_free(file);
  return j;
}

char *data_file(const char *rel) { return g_build_filename(g_getenv("PTDSIM_DATA_DIR"), rel, NULL); }

void write_bytes(const char *path, const char *text, gssize len) {
  GError *error = NULL;
  g_assert_true(g_file_set_contents(path, text, len, &error));
  g_assert_no_error(error);
}

void write_h100_with_nics(const char *path, guint nics, const char *name) {
  cJSON *j = load_shipped("topologies", "dgx-h100-superpod");
  cJSON_ReplaceItemInObjectCaseSensitive(j, "nics_per_node", cJSON_CreateNumber(nics));
  if (name)
    cJSON_ReplaceItemInObjectCaseSensitive(j, "name", cJSON_CreateString(name));
  char *printed = cJSON_Print(j);
  g_assert_true(g_file_set_contents(path, printed, -1, NULL));
  cJSON_free(printed);
  cJSON_Delete(j);
}

double profile_peak_tflops(const cJSON *run) {
  const cJSON *c = obj(run, "config");
  cJSON *prof = load_shipped("calibrate/profiles", str(c, "profile"));
  double peak = num(prof, strcmp(str(c, "precision"), "fp8") == 0 ? "peak_fp8_tflops" : "peak_tflops");
  cJSON_Delete(prof);
  return peak;
}

void write_gz(const char *path, const char *text, gsize cut) {
  char *full = g_strconcat(path, ".whole.gz", NULL);
  gzFile z = gzopen(full, "wb");
  g_assert_nonnull(z);
  g_assert_cmpint(gzwrite(z, text, (unsigned)strlen(text)), ==, (int)strlen(text));
  g_assert_cmpint(gzclose(z), ==, Z_OK);
  gsize n = 0;
  char *bytes = slurp(full, &n);
  g_assert_true(g_file_set_contents(path, bytes, (gssize)(cut ? MIN(cut, n) : n), NULL));
  g_unlink(full);
  g_free(bytes);
  g_free(full);
}
