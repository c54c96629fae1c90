/* A JSON text file, plain or gzip, read whole with its bounds checked as it
 * inflates (see gzread.h). */
#include "gzread.h"

#include <stdarg.h>
#include <string.h>
#include <zlib.h>

#include "jsonutil.h"

static gboolean read_error(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean read_error(GError **error, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *what = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error(error, PTD_DATA_ERROR, PTD_DATA_ERROR_PARSE, "%s", what);
  g_free(what);
  return FALSE;
}

typedef struct {
  GByteArray *out;
  gsize max_bytes;
  const char *what, *too_large;
} Sink;

/* What is checked as the text arrives, before it is all in memory: no NUL
 * byte (JSON text has none), an object first, and the size. */
static gboolean take_text(const Sink *s, const guint8 *data, gsize n, GError **error) {
  GByteArray *out = s->out;
  if (memchr(data, '\0', n))
    return read_error(error, "it is not valid JSON: a NUL byte at byte %" G_GSIZE_FORMAT,
                      out->len + (gsize)((const guint8 *)memchr(data, '\0', n) - data));
  g_byte_array_append(out, data, (guint)n);
  gsize i = 0;
  while (i < out->len && (out->data[i] == ' ' || out->data[i] == '\t' || out->data[i] == '\n' || out->data[i] == '\r'))
    i++;
  if (i < out->len && out->data[i] != '{')
    return read_error(error, "it is not valid JSON: it does not begin with an object; not %s", s->what);
  if (out->len > s->max_bytes)
    return read_error(error, "it is larger than %llu bytes uncompressed; %s", (unsigned long long)s->max_bytes,
                      s->too_large);
  return TRUE;
}

gboolean ptd_read_json_text(const char *path, gsize max_bytes, const char *what, const char *too_large, GByteArray *out,
                            char **sha256, GError **error) {
  if (sha256)
    *sha256 = NULL;
  if (!g_file_test(path, G_FILE_TEST_IS_REGULAR))
    return read_error(error, g_file_test(path, G_FILE_TEST_EXISTS) ? "not a regular file" : "no such file");
  gsize raw_len = 0;
  GError *local = NULL;
  char *raw = ptd_read_input(path, max_bytes, &raw_len, &local);
  if (!raw) {
    gboolean r = read_error(error, "%s", local->message);
    g_error_free(local);
    return r;
  }
  Sink s = {out, max_bytes, what, too_large};
  const guint8 *in = (const guint8 *)raw;
  gboolean ok = TRUE;
  if (raw_len < 2 || in[0] != 0x1f || in[1] != 0x8b) {
    ok = raw_len == 0 || take_text(&s, in, raw_len, error);
    if (ok && sha256)
      *sha256 = g_compute_checksum_for_data(G_CHECKSUM_SHA256, in, raw_len);
    g_free(raw);
    return ok;
  }
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {
    g_free(raw);
    return read_error(error, "zlib cannot start");
  }
  guint8 buf[1 << 16];
  zs.next_in = (Bytef *)in;
  zs.avail_in = (uInt)MIN(raw_len, (gsize)G_MAXUINT32);
  while (ok) {
    zs.next_out = buf;
    zs.avail_out = sizeof buf;
    int z = inflate(&zs, Z_NO_FLUSH);
    gsize produced = sizeof buf - zs.avail_out;
    if (produced && !take_text(&s, buf, produced, error))
      ok = FALSE;
    else if (z == Z_STREAM_END) {
      gsize left = zs.avail_in;
      if (left == 0)
        break;
      /* another gzip member may follow (gzip's own concatenation); anything else is junk */
      if (left >= 2 && zs.next_in[0] == 0x1f && zs.next_in[1] == 0x8b)
        ok = inflateReset(&zs) == Z_OK || read_error(error, "zlib cannot restart");
      else
        ok = read_error(error,
                        "%" G_GSIZE_FORMAT " bytes that are not gzip data follow the compressed trace (a damaged or "
                        "altered file?)",
                        left);
    } else if (z != Z_OK && !(z == Z_BUF_ERROR && produced))
      ok = read_error(error, "%s (a truncated or damaged gzip file?)",
                      z == Z_BUF_ERROR ? "unexpected end of file" : zs.msg ? zs.msg : "corrupt gzip data");
    if (ok && out->len > PTD_GZIP_RATIO_AFTER && out->len / PTD_GZIP_MAX_RATIO > (gsize)(raw_len - zs.avail_in))
      ok = read_error(error,
                      "it inflates more than %u times its compressed size, far more than a trace does (a gzip bomb?)",
                      PTD_GZIP_MAX_RATIO);
  }
  inflateEnd(&zs);
  if (ok && sha256)
    *sha256 = g_compute_checksum_for_data(G_CHECKSUM_SHA256, in, raw_len);
  g_free(raw);
  return ok;
}
