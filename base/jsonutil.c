/* ptdsim — JSON file helpers (see jsonutil.h). */
#include "jsonutil.h"

#include <math.h>
#include <string.h>

G_DEFINE_QUARK(ptd-data-error-quark, ptd_data_error)

const char *ptd_data_dir(void) {
  const char *env = g_getenv("PTDSIM_DATA_DIR");
  return env && *env ? env : PTDSIM_SOURCE_DIR;
}

char *ptd_data_resolve(const char *subdir, const char *name_or_file, const char *what, GError **error) {
  if (g_file_test(name_or_file, G_FILE_TEST_IS_REGULAR))
    return g_strdup(name_or_file);
  char *file = g_strconcat(name_or_file, ".json", NULL);
  char *path = g_build_filename(ptd_data_dir(), subdir, file, NULL);
  g_free(file);
  if (!strchr(name_or_file, '/') && !g_str_has_suffix(name_or_file, ".json") &&
      g_file_test(path, G_FILE_TEST_IS_REGULAR))
    return path;
  g_free(path);
  /* List what is shipped, so the error says how to fix it. */
  char *dir = g_build_filename(ptd_data_dir(), subdir, NULL);
  GString *names = g_string_new(NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d) {
    GPtrArray *found = g_ptr_array_new_with_free_func(g_free);
    const char *entry;
    while ((entry = g_dir_read_name(d)))
      if (g_str_has_suffix(entry, ".json"))
        g_ptr_array_add(found, g_strndup(entry, strlen(entry) - 5));
    g_dir_close(d);
    g_ptr_array_sort(found, (GCompareFunc)(void (*)(void))g_ascii_strcasecmp);
    for (guint i = 0; i < found->len; i++)
      g_string_append_printf(names, "%s%s", i ? ", " : "", (char *)g_ptr_array_index(found, i));
    g_ptr_array_free(found, TRUE);
  }
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND, "no %s named '%s' (no such file; shipped: %s)", what,
              name_or_file, names->len ? names->str : "none found");
  g_string_free(names, TRUE);
  g_free(dir);
  return NULL;
}

cJSON *ptd_json_load(const char *path, GError **error) {
  char *text = NULL;
  gsize len = 0;
  GError *io = NULL;
  if (!g_file_get_contents(path, &text, &len, &io)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND, "cannot read %s: %s", path, io->message);
    g_error_free(io);
    return NULL;
  }
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, TRUE) /* include the NUL */;
  if (!root) {
    gsize at = end && end >= text ? (gsize)(end - text) : 0;
    guint line = 1;
    for (gsize i = 0; i < at && i < len; i++)
      line += text[i] == '\n';
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_PARSE, "%s: malformed JSON near line %u (fix the file's syntax)",
                path, line);
    g_free(text);
    return NULL;
  }
  g_free(text);
  if (!cJSON_IsObject(root)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: the top level must be a JSON object", path);
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

static gboolean invalid(GError **error, const char *file, const char *key, const char *why) {
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: key '%s' %s", file, key, why);
  return FALSE;
}

gboolean ptd_json_number(const cJSON *obj, const char *key, const char *file, double *out, GError **error) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item)
    return invalid(error, file, key, "is missing");
  if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
    return invalid(error, file, key, "must be a number");
  *out = item->valuedouble;
  return TRUE;
}

gboolean ptd_json_positive(const cJSON *obj, const char *key, const char *file, double *out, GError **error) {
  if (!ptd_json_number(obj, key, file, out, error))
    return FALSE;
  if (*out <= 0)
    return invalid(error, file, key, "must be greater than zero");
  return TRUE;
}

gboolean ptd_json_fraction(const cJSON *obj, const char *key, const char *file, double *out, GError **error) {
  if (!ptd_json_number(obj, key, file, out, error))
    return FALSE;
  if (*out <= 0 || *out > 1)
    return invalid(error, file, key, "must be in (0, 1]");
  return TRUE;
}

gboolean ptd_json_count(const cJSON *obj, const char *key, const char *file, guint *out, GError **error) {
  double v;
  if (!ptd_json_number(obj, key, file, &v, error))
    return FALSE;
  if (v < 1 || v > 1e9 || v != floor(v))
    return invalid(error, file, key, "must be a whole number of at least 1");
  *out = (guint)v;
  return TRUE;
}

const char *ptd_json_string(const cJSON *obj, const char *key, const char *file, GError **error) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item) {
    invalid(error, file, key, "is missing");
    return NULL;
  }
  if (!cJSON_IsString(item) || !item->valuestring[0]) {
    invalid(error, file, key, "must be a non-empty string");
    return NULL;
  }
  return item->valuestring;
}

const cJSON *ptd_json_object(const cJSON *obj, const char *key, const char *file, GError **error) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item) {
    invalid(error, file, key, "is missing");
    return NULL;
  }
  if (!cJSON_IsObject(item)) {
    invalid(error, file, key, "must be an object");
    return NULL;
  }
  return item;
}

void ptd_append_exact_number(GString *s, double v) {
  if (!isfinite(v))
    return;
  char buf[40];
  for (int digits = 15; digits <= 17; digits++) {
    g_snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (g_ascii_strtod(buf, NULL) == v)
      break;
  }
  g_string_append(s, buf);
}

void ptd_json_exact_numbers(cJSON *o) {
  for (cJSON *c = o ? o->child : NULL, *next; c; c = next) {
    next = c->next;
    if (cJSON_IsNumber(c) && isfinite(c->valuedouble)) {
      GString *text = g_string_new(NULL);
      ptd_append_exact_number(text, c->valuedouble);
      cJSON *raw = cJSON_CreateRaw(text->str);
      g_string_free(text, TRUE);
      if (c->string) /* an object's member keeps its key */
        cJSON_ReplaceItemInObjectCaseSensitive(o, c->string, raw);
      else
        cJSON_ReplaceItemViaPointer(o, c, raw);
    } else
      ptd_json_exact_numbers(c);
  }
}
