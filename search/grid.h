/* ptdsim — a grid of configurations for `ptdsim sweep`.
 *
 * Every configuration option (options.h) takes one value or many:
 *   a list           --tp 1,2,4,8
 *   a range          --micro-batch 1..8          (step 1)
 *                    --gpus 64..1024x2           (doubling: 64, 128, ..., 1024)
 *                    --global-batch 256..1024+256 (step 256)
 *   a named set      --schedule all, --model all (every choice of the option)
 * mixed freely in a list (--gpus 8,64..256x2); a flag takes true, false or
 * both (--no-fusion=true,false; bare --no-fusion is true).  --slices, whose
 * own values have commas (512,384,...), separates its values with ';'.
 * Hardware what-ifs: `--set KEY=VALUES` overrides a number of the cluster or
 * the profile by its JSON path, cluster.network.nic_GBps=24,48 or
 * profile.peak_tflops=312,624 (numbers, lists and ranges as above).
 * `--zip A,B` varies options (or set keys) A and B together, value k of
 * each with value k of the other, instead of all their combinations.
 *
 * The grid is the Cartesian product of its axes in the order they were
 * given (a zip group at its first member's place), the last varying
 * fastest; point k is the same configuration every time.  A sweep file
 * (JSON) holds the same: {"options": {"model": "gpt3-175b", "gpus": 1024,
 * "global-batch": 1536, "tp": [4, 8], "pp": [32, 16], "micro-batch": "1..8"},
 * "set": {"cluster.network.nic_GBps": [24, 48]}, "zip": [["tp", "pp"]]}. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "../models/profile.h"
#include "../topologies/cluster.h"
#include "options.h"

#define SEARCH_GRID_ERROR (search_grid_error_quark())
GQuark search_grid_error_quark(void);
typedef enum { SEARCH_GRID_ERROR_SPEC } SearchGridError;

/* The largest grid ptdsim sweeps: far beyond what a day of simulation covers. */
#define SEARCH_GRID_MAX_POINTS 100000000ull

typedef struct _SearchGrid SearchGrid;

SearchGrid *search_grid_new(void);
void search_grid_free(SearchGrid *g);
/* Whether each row also prices the step's effects (step_effects_s: a run
 * without each effect, as ptdsim run does); off, those columns are empty. */
void search_grid_set_step_effects(SearchGrid *g, gboolean on);
gboolean search_grid_step_effects(const SearchGrid *g);
/* Adds option `id` with its values (the text after the option, or NULL for
 * a bare flag).  One-line errors name the option and what is wrong. */
gboolean search_grid_add_option(SearchGrid *g, SearchOptId id, const char *spec, GError **error);
/* Adds `KEY=VALUES` (cluster.PATH or profile.PATH). */
gboolean search_grid_add_set(SearchGrid *g, const char *key_values, GError **error);
/* Zips the named columns (option names or set keys, comma-separated): they
 * must all be in the grid, with as many values each. */
gboolean search_grid_add_zip(SearchGrid *g, const char *names, GError **error);
/* Reads a sweep file's options, sets and zips into the grid. */
gboolean search_grid_add_file(SearchGrid *g, const char *path, GError **error);
/* Checks what can be checked before running: that the set keys name
 * numbers in the cluster and profile files of every point, and that the
 * grid is not empty nor beyond SEARCH_GRID_MAX_POINTS.  Loads each distinct
 * machine (cluster, profile and set values) once. */
gboolean search_grid_prepare(SearchGrid *g, GError **error);

guint64 search_grid_points(const SearchGrid *g);
/* The cluster and profile files of point k as JSON, the point's --set
 * values written in, with the paths they came from (free all four);
 * FALSE with a one-line error. */
gboolean search_grid_machine_json(const SearchGrid *g, guint64 k, cJSON **cluster, char **cluster_path,
                                  cJSON **profile, char **profile_path, GError **error);
/* The columns that describe a point: every option given, in table order,
 * then the set keys in the order given. */
guint search_grid_n_columns(const SearchGrid *g);
const char *search_grid_column(const SearchGrid *g, guint c);
/* Point k's value of column c, as text ("8", "gpt3-175b", "true"). */
const char *search_grid_value(const SearchGrid *g, guint64 k, guint c);

/* Point k's configuration (caller clears it) and its machine (owned by the
 * grid; safe to share between threads, read-only). */
gboolean search_grid_point(const SearchGrid *g, guint64 k, SearchConfig *cfg, const TopoCluster **cluster,
                           const ModelProfile **profile, GError **error);

/* The files the grid's machines were made of, each once, in order, with
 * the first 16 hex digits of its SHA-256: "cluster selene.json sha256
 * ce77e17332b7420e, profile a100-sxm4-80gb.json sha256 c531840120608dec"
 * (after search_grid_prepare).  A sweep's output file records it. */
char *search_grid_inputs(const SearchGrid *g);
