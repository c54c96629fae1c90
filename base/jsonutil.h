/* ptdsim — reading the project's JSON files (profiles, clusters, reference
 * data) with cJSON, with one-line errors that name the file and the key. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#define PTD_DATA_ERROR (ptd_data_error_quark())
GQuark ptd_data_error_quark(void);
typedef enum { PTD_DATA_ERROR_NOT_FOUND, PTD_DATA_ERROR_PARSE, PTD_DATA_ERROR_INVALID } PtdDataError;

/* Directory holding the shipped data (calibrate/profiles, topologies,
 * traces/reference): $PTDSIM_DATA_DIR, else the source tree it was built from. */
const char *ptd_data_dir(void);

/* What a NAME|FILE option takes, for --help. */
#define PTD_NAME_OR_PATH_HELP "a built-in's name, or a JSON file's path (with a '/' or ending in .json)"

/* TRUE when NAME_OR_FILE is a path (has a '/' or ends in ".json"), FALSE
 * when it is a built-in's name. */
gboolean ptd_is_path(const char *name_or_file);
/* Resolves NAME_OR_FILE: a path (ptd_is_path) is that file, which must be a
 * regular file; a name is DATA_DIR/SUBDIR/NAME.json, never a file of the
 * working directory.  Returns a newly allocated path or NULL with `error`
 * set (listing what `what` names are shipped). */
char *ptd_data_resolve(const char *subdir, const char *name_or_file, const char *what, GError **error);

/* The most bytes a JSON input (cluster, profile, measurements, sweep file)
 * may have. */
#define PTD_JSON_MAX_BYTES ((gsize)64 << 20)
/* The deepest nesting of objects and arrays a ptdsim input may have (the
 * deepest shipped file has under 10 levels). */
#define PTD_JSON_MAX_DEPTH 64u
/* FALSE, with the offset where it goes deeper in *at, when the JSON text's
 * objects and arrays nest deeper than `max` (strings skipped). */
gboolean ptd_json_depth_ok(const char *text, gsize len, guint max, gsize *at);

/* The whole of a regular file of at most max_bytes, NUL-terminated, its
 * length in *len; pipes, devices and directories are refused without
 * blocking, a larger file without reading it all. */
char *ptd_read_input(const char *path, gsize max_bytes, gsize *len, GError **error);
/* Parses `text` (len bytes, NUL-terminated) as one JSON object: no trailing
 * junk, no NUL byte, no key twice in an object. */
cJSON *ptd_json_parse(const char *text, gsize len, const char *path, GError **error);
/* Reads (ptd_read_input, PTD_JSON_MAX_BYTES) and parses (ptd_json_parse) a JSON file. */
cJSON *ptd_json_load(const char *path, GError **error);
/* FALSE with "FILE: key 'a.b' is given twice" when an object under `node`
 * repeats a key; `where` is node's key path (NULL at the top). */
gboolean ptd_json_unique_keys(const cJSON *node, const char *file, const char *where, GError **error);

/* A physical range for a number read from a file: [lo, hi] (or (lo, hi]
 * when lo_open) in `unit`, whole numbers only when `whole`.  The ranges
 * are listed in doc/inputs.md. */
typedef struct {
  double lo, hi;
  gboolean lo_open, whole;
  const char *unit;
} PtdRange;

/* "[0.01, 1] (fraction)" */
void ptd_range_text(const PtdRange *r, char *buf, gsize size);
/* FALSE with "FILE: key 'K' is V, outside RANGE; ..." when v is outside r. */
gboolean ptd_range_check(double v, const PtdRange *r, const char *file, const char *key, GError **error);
/* The number at key_path ("nvlink.p2p_GBps": members of members), checked
 * against `range`; errors name the file, the key path and the range. */
gboolean ptd_json_in(const cJSON *obj, const char *key_path, const char *file, const PtdRange *range, double *out,
                     GError **error);
/* Like ptd_json_in, but a missing key gives `dflt`. */
gboolean ptd_json_in_or(const cJSON *obj, const char *key_path, const char *file, const PtdRange *range, double dflt,
                        double *out, GError **error);

/* Typed getters: each fails with "FILE: key 'K' ..." when the key is missing
 * or has the wrong type (numbers: ptd_json_in, below, with their range). */
const char *ptd_json_string(const cJSON *obj, const char *key, const char *file, GError **error);
const cJSON *ptd_json_object(const cJSON *obj, const char *key, const char *file, GError **error);

/* Replaces every number in `o` (recursively) by raw text with the fewest
 * of 15, 16 or 17 significant digits that reads back as the same double.
 * cJSON prints 15 digits whenever they read back within its tolerance,
 * which can be an ulp off; ptdsim's outputs give back exactly the numbers
 * it computed.  Call it just before printing. */
void ptd_json_exact_numbers(cJSON *o);
/* The same digits, appended to `s`: a number as ptd_json_exact_numbers
 * writes it (nothing for NAN or infinities). */
void ptd_append_exact_number(GString *s, double v);
