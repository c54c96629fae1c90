/* ptdsim — reading a JSON text file that may be gzip-compressed (traces:
 * ptdsim's own and torch.profiler's), bounded in size and ratio. */
#pragma once

#include <glib.h>

/* Past its first PTD_GZIP_RATIO_AFTER bytes, a gzip file may inflate to at
 * most PTD_GZIP_MAX_RATIO times the compressed bytes read so far (JSON
 * traces compress about 10:1): more is a gzip bomb, refused before it fills
 * the memory. */
#define PTD_GZIP_MAX_RATIO 100u
#define PTD_GZIP_RATIO_AFTER ((gsize)1 << 20)

/* Appends the text of `path` to `out`: a regular file, plain or gzip (one or
 * more members, nothing after them), of at most `max_bytes` on disk and
 * inflated.  The text is checked as it arrives: no NUL byte and, unless
 * empty, an object first (it is JSON text).  FALSE with a one-line message
 * in PTD_DATA_ERROR that does not name the file (the caller says which file
 * and what it is): `what` names what a non-object is not ("a trace"), and
 * `too_large` follows "it is larger than N bytes uncompressed; " when the
 * text is over `max_bytes`.  `out` is not NUL-terminated.  When `sha256`
 * is not NULL it is set, on success, to the SHA-256 (lower-case hex,
 * g_free) of the file's bytes as they are on disk (compressed, if gzip),
 * and to NULL on failure. */
gboolean ptd_read_json_text(const char *path, gsize max_bytes, const char *what, const char *too_large, GByteArray *out,
                            char **sha256, GError **error);
