/* ptdsim — the rows of `ptdsim sweep`: one per point of a grid (grid.h), in
 * grid order.
 *
 * A row is the point's index, its configuration (the grid's columns, as
 * given), its status -- ok, out_of_memory (the configuration does not fit;
 * --allow-oom simulates it anyway) or invalid (the plan checks refuse it) --
 * with the reason, then every result of `ptdsim run --format json`.
 *
 *  - CSV: a header line, then one line per row; results flattened to dotted
 *    columns (time_breakdown_s.compute, terapipe.idle_fraction...), empty
 *    where a row has none; numbers in the fewest digits that read back.
 *  - JSONL: one object per line, {"index", "options", "status", "reason",
 *    "result"}, "result" being exactly run's JSON object.
 *
 * Rows are text with their newline, made on any thread; writing them is
 * the caller's. */
#pragma once

#include "grid.h"

typedef enum { SEARCH_SWEEP_CSV, SEARCH_SWEEP_JSONL } SearchSweepFormat;
typedef enum { SEARCH_SWEEP_OK, SEARCH_SWEEP_OUT_OF_MEMORY, SEARCH_SWEEP_INVALID, SEARCH_SWEEP_N_STATUS } SearchSweepStatus;

const char *search_sweep_status_name(SearchSweepStatus s);

/* The CSV header line (with its newline); NULL for JSONL, which has none. */
char *search_sweep_header(const SearchGrid *g, SearchSweepFormat f);

/* Evaluates point k: its row (owned by the caller), its status. */
char *search_sweep_row(const SearchGrid *g, guint64 k, SearchSweepFormat f, SearchSweepStatus *status);

/* Checks that `line` (without its newline) is row k of this grid as
 * search_sweep_row writes it: its index and configuration.  For --resume:
 * a one-line error says where the file and the grid part. */
gboolean search_sweep_check_row(const SearchGrid *g, SearchSweepFormat f, const char *line, guint64 k,
                                SearchSweepStatus *status, GError **error);

/* The flattened result columns of the CSV, in order (for tests). */
const char *const *search_sweep_result_columns(guint *n);
