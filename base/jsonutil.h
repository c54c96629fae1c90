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

/* Resolves NAME_OR_FILE: an existing file path is used as is; otherwise
 * DATA_DIR/SUBDIR/NAME.json.  Returns a newly allocated path or NULL with
 * `error` set (listing what `what` names are shipped). */
char *ptd_data_resolve(const char *subdir, const char *name_or_file, const char *what, GError **error);

/* Reads and parses a JSON file; the root must be an object. */
cJSON *ptd_json_load(const char *path, GError **error);

/* Typed getters: each fails with "FILE: key 'K' ..." when the key is missing
 * or has the wrong type or range. */
gboolean ptd_json_number(const cJSON *obj, const char *key, const char *file, double *out, GError **error);
gboolean ptd_json_positive(const cJSON *obj, const char *key, const char *file, double *out, GError **error);
gboolean ptd_json_fraction(const cJSON *obj, const char *key, const char *file, double *out, GError **error);
gboolean ptd_json_count(const cJSON *obj, const char *key, const char *file, guint *out, GError **error);
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
