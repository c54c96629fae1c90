/* ptdsim — what every end-to-end test needs: run the real binary
 * ($PTDSIM_BIN) without a shell, capture its exit status and output, and
 * read its JSON with assertions. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

extern const char *bin; /* $PTDSIM_BIN, set by cli_harness_init() */

/* Reads $PTDSIM_BIN; FALSE (with a message) when meson did not set it. */
gboolean cli_harness_init(void);

typedef struct {
  int status; /* exit status, or -1 if it did not exit normally */
  char *out, *err;
} Proc;

void proc_clear(Proc *p);
/* Runs ptdsim with the NULL-terminated arguments in `args`. */
Proc run_argv(const char *const *args);
/* Runs ptdsim with `args`, a space-separated list (split here, no shell). */
Proc run_line(const char *args);
/* Runs `script` under /bin/sh with $PTDSIM_BIN and $T (= `dir`) exported,
 * killed after `timeout_s` seconds: a run that would hang fails instead of
 * stalling the suite. */
Proc run_sh_in(const char *dir, const char *script, guint timeout_s);
/* Runs `args` (as run_line) and asserts it exits 0. */
void run_line_ok(const char *args);
/* The output of a successful run as JSON (asserts exit 0 and valid JSON). */
cJSON *parse_json(const Proc *p);
/* run_line + parse_json, also asserting that nothing went to stderr. */
cJSON *run_json(const char *args);

/* Typed members, asserted present (numbers also finite). */
double num(const cJSON *obj, const char *key);
const char *str(const cJSON *obj, const char *key);
const cJSON *obj(const cJSON *parent, const char *key);
const cJSON *arr(const cJSON *obj, const char *key);

/* The whole of a file (asserted readable); its length in *len. */
char *slurp(const char *path, gsize *len);
/* A clean refusal: exit 1 (an error, not a crash), nothing on stdout, and
 * one line on stderr, "ptdsim: ...", containing `needle`. */
void assert_one_line_error(const Proc *p, const char *needle);

/* A command line that must be refused: `args` (space-separated) and what
 * the one line on stderr must contain; `name` names the test case. */
typedef struct {
  const char *name, *args, *mention;
} CliBadCase;
/* Runs a CliBadCase (g_test_add_data_func's data) and asserts the clean
 * refusal (assert_one_line_error). */
void cli_test_bad(gconstpointer data);
/* Runs each of n CliBadCases in turn, as cli_test_bad. */
void cli_test_bad_each(const CliBadCase *cases, gsize n);
/* A shipped JSON file, $PTDSIM_DATA_DIR/SUBDIR/NAME.json, parsed (asserted). */
cJSON *load_shipped(const char *subdir, const char *name);
/* $PTDSIM_DATA_DIR/REL (caller frees). */
char *data_file(const char *rel);
/* Writes `text` gzipped to `path`, its first `cut` bytes only where `cut`
 * is not 0 (a truncated gzip) (asserted). */
void write_gz(const char *path, const char *text, gsize cut);
/* Writes `len` bytes of `text` (-1: up to its NUL) to `path` (asserted). */
void write_bytes(const char *path, const char *text, gssize len);
/* Writes the shipped dgx-h100-superpod cluster with `nics` NICs per node
 * to `path` (named `name` where not NULL): a node whose GPUs share NICs. */
void write_h100_with_nics(const char *path, guint nics, const char *name);
/* The peak a run's MFU is measured against: its profile's (config.profile,
 * a shipped profile) at its precision (config.precision). */
double profile_peak_tflops(const cJSON *run);
