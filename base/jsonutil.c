/* ptdsim — JSON file helpers (see jsonutil.h). */
#include "jsonutil.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "text.h"

G_DEFINE_QUARK(ptd-data-error-quark, ptd_data_error)

const char *ptd_data_dir(void) {
  const char *env = g_getenv("PTDSIM_DATA_DIR");
  return env && *env ? env : PTDSIM_SOURCE_DIR;
}

gboolean ptd_is_path(const char *name_or_file) {
  return strchr(name_or_file, '/') != NULL || g_str_has_suffix(name_or_file, ".json");
}

static gint by_name(gconstpointer a, gconstpointer b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* "a, b, c": the names shipped in DATA_DIR/SUBDIR, for an error message. */
static char *shipped_names(const char *subdir) {
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
    g_ptr_array_sort(found, by_name);
    for (guint i = 0; i < found->len; i++)
      g_string_append_printf(names, "%s%s", i ? ", " : "", (char *)g_ptr_array_index(found, i));
    g_ptr_array_free(found, TRUE);
  }
  g_free(dir);
  if (!names->len)
    g_string_append(names, "none found");
  return g_string_free(names, FALSE);
}

char *ptd_data_resolve(const char *subdir, const char *name_or_file, const char *what, GError **error) {
  /* A path is a file, and only a file; a name is a built-in, and only a
   * built-in: a file in the working directory never stands in for one. */
  if (ptd_is_path(name_or_file)) {
    GStatBuf st;
    if (g_stat(name_or_file, &st) != 0)
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND, "cannot read %s file '%s': %s", what, name_or_file,
                  g_strerror(errno));
    else if (S_ISDIR(st.st_mode))
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND,
                  "%s file '%s' is a directory; give a JSON file", what, name_or_file);
    else if (!S_ISREG(st.st_mode))
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND,
                  "%s file '%s' is not a regular file (a pipe or a device); give a JSON file", what, name_or_file);
    else
      return g_strdup(name_or_file);
    return NULL;
  }
  char *file = g_strconcat(name_or_file, ".json", NULL);
  char *path = g_build_filename(ptd_data_dir(), subdir, file, NULL);
  g_free(file);
  if (g_file_test(path, G_FILE_TEST_IS_REGULAR))
    return path;
  g_free(path);
  char *names = shipped_names(subdir);
  gboolean here = g_file_test(name_or_file, G_FILE_TEST_EXISTS);
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND,
              "no %s named '%s' (built-ins: %s; a file is given by a path with a '/' or ending in .json%s%s)", what,
              name_or_file, names, here ? ", e.g. ./" : "", here ? name_or_file : "");
  g_free(names);
  return NULL;
}

/* The key path of `item` below `prefix`, for errors. */
static char *key_path(const char *prefix, const char *key) {
  return prefix && *prefix ? g_strdup_printf("%s.%s", prefix, key) : g_strdup(key);
}

gboolean ptd_json_unique_keys(const cJSON *node, const char *file, const char *where, GError **error) {
  if (!cJSON_IsObject(node) && !cJSON_IsArray(node))
    return TRUE;
  GHashTable *seen = cJSON_IsObject(node) ? g_hash_table_new(g_str_hash, g_str_equal) : NULL;
  gboolean ok = TRUE;
  guint i = 0;
  for (const cJSON *c = node->child; ok && c; c = c->next, i++) {
    char *sub = seen ? key_path(where, c->string) : g_strdup_printf("%s[%u]", where ? where : "", i);
    if (seen && !g_hash_table_add(seen, c->string)) {
      char *echo = ptd_echo(sub, PTD_ECHO_MAX, TRUE); /* the file's bytes: one line whatever they hold */
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_PARSE,
                  "%s: key '%s' is given twice; keep one (JSON readers disagree on which would count)", file, echo);
      g_free(echo);
      ok = FALSE;
    } else
      ok = ptd_json_unique_keys(c, file, sub, error);
    g_free(sub);
  }
  if (seen)
    g_hash_table_destroy(seen);
  return ok;
}

char *ptd_read_input(const char *path, gsize max_bytes, gsize *len, GError **error) {
  /* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
  int fd = g_open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND, "cannot read %s: %s", path, g_strerror(errno));
    if (fd >= 0)
      close(fd);
    return NULL;
  }
  if (!S_ISREG(st.st_mode)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND, "cannot read %s: %s; give a regular file", path,
                S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file (a pipe or a device)");
    close(fd);
    return NULL;
  }
  if ((guint64)st.st_size > max_bytes) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID,
                "%s is %" G_GUINT64_FORMAT " bytes, more than the %" G_GSIZE_FORMAT " a ptdsim input may have", path,
                (guint64)st.st_size, max_bytes);
    close(fd);
    return NULL;
  }
  /* Read at most one byte past the limit: a file that grows while read is cut there, and refused. */
  GByteArray *buf = g_byte_array_sized_new((guint)st.st_size + 1);
  guint8 chunk[1 << 16];
  gboolean ok = TRUE;
  while (ok && buf->len <= max_bytes) {
    gssize n = read(fd, chunk, MIN(sizeof chunk, max_bytes + 1 - buf->len));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_NOT_FOUND, "cannot read %s: %s", path, g_strerror(errno));
      ok = FALSE;
    } else if (n == 0)
      break;
    else
      g_byte_array_append(buf, chunk, (guint)n);
  }
  close(fd);
  if (ok && buf->len > max_bytes) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s is more than the %" G_GSIZE_FORMAT
                " bytes a ptdsim input may have", path, max_bytes);
    ok = FALSE;
  }
  if (!ok) {
    g_byte_array_free(buf, TRUE);
    return NULL;
  }
  *len = buf->len;
  g_byte_array_append(buf, (const guint8 *)"", 1);
  return (char *)g_byte_array_free(buf, FALSE);
}

gboolean ptd_json_depth_ok(const char *text, gsize len, guint max, gsize *at) {
  guint depth = 0;
  gboolean in_string = FALSE;
  for (gsize i = 0; i < len; i++) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = FALSE;
    } else if (c == '"')
      in_string = TRUE;
    else if (c == '{' || c == '[') {
      if (++depth > max) {
        *at = i;
        return FALSE;
      }
    } else if ((c == '}' || c == ']') && depth > 0)
      depth--;
  }
  return TRUE;
}

cJSON *ptd_json_parse(const char *text, gsize len, const char *path, GError **error) {
  if (strlen(text) != len) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_PARSE, "%s: contains a NUL byte; it is not a JSON text file",
                path);
    return NULL;
  }
  gsize deep_at = 0;
  if (!ptd_json_depth_ok(text, len, PTD_JSON_MAX_DEPTH, &deep_at)) {
    guint line = 1;
    for (gsize i = 0; i < deep_at; i++)
      line += text[i] == '\n';
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_PARSE,
                "%s: nested more than %u levels deep at line %u; no ptdsim input is", path, PTD_JSON_MAX_DEPTH, line);
    return NULL;
  }
  const char *end = NULL;
  /* require_null_terminated: nothing but white space after the value */
  cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, TRUE) /* include the NUL */;
  if (!root) {
    gsize at = end && end >= text ? (gsize)(end - text) : 0;
    guint line = 1;
    for (gsize i = 0; i < at && i < len; i++)
      line += text[i] == '\n';
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_PARSE,
                "%s: malformed JSON near line %u (fix the file's syntax; one JSON value, nothing after it)", path, line);
    return NULL;
  }
  if (!cJSON_IsObject(root)) {
    g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: the top level must be a JSON object", path);
    cJSON_Delete(root);
    return NULL;
  }
  if (!ptd_json_unique_keys(root, path, NULL, error)) {
    cJSON_Delete(root);
    return NULL;
  }
  return root;
}

cJSON *ptd_json_load(const char *path, GError **error) {
  gsize len = 0;
  char *text = ptd_read_input(path, PTD_JSON_MAX_BYTES, &len, error);
  cJSON *root = text ? ptd_json_parse(text, len, path, error) : NULL;
  g_free(text);
  return root;
}

static gboolean invalid(GError **error, const char *file, const char *key, const char *why) {
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: key '%s' %s", file, key, why);
  return FALSE;
}

void ptd_range_text(const PtdRange *r, char *buf, gsize size) {
  g_snprintf(buf, size, "%s%g, %g] %s", r->lo_open ? "(" : "[", r->lo, r->hi, r->unit);
}

gboolean ptd_range_check(double v, const PtdRange *r, const char *file, const char *key, GError **error) {
  if (isfinite(v) && (r->lo_open ? v > r->lo : v >= r->lo) && v <= r->hi)
    return TRUE;
  char range[96];
  ptd_range_text(r, range, sizeof range);
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_INVALID, "%s: key '%s' is %g, outside %s; give a value in that range",
              file, key, v, range);
  return FALSE;
}

/* obj's member at "a.b.c", or NULL. */
static const cJSON *at_path(const cJSON *obj, const char *key_path) {
  char **parts = g_strsplit(key_path, ".", -1);
  const cJSON *item = obj;
  for (guint i = 0; parts[i] && item; i++)
    item = cJSON_IsObject(item) ? cJSON_GetObjectItemCaseSensitive(item, parts[i]) : NULL;
  g_strfreev(parts);
  return item;
}

gboolean ptd_json_in(const cJSON *obj, const char *key_path, const char *file, const PtdRange *range, double *out,
                     GError **error) {
  const cJSON *item = at_path(obj, key_path);
  if (!item)
    return invalid(error, file, key_path, "is missing");
  if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
    return invalid(error, file, key_path, "must be a number");
  if (range->whole && item->valuedouble != floor(item->valuedouble))
    return invalid(error, file, key_path, "must be a whole number");
  if (!ptd_range_check(item->valuedouble, range, file, key_path, error))
    return FALSE;
  *out = item->valuedouble;
  return TRUE;
}

gboolean ptd_json_in_or(const cJSON *obj, const char *key_path, const char *file, const PtdRange *range, double dflt,
                        double *out, GError **error) {
  if (!at_path(obj, key_path)) {
    *out = dflt;
    return TRUE;
  }
  return ptd_json_in(obj, key_path, file, range, out, error);
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
