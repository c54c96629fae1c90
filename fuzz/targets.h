/* ptdsim — the fuzz targets: every reader of a file a user hands ptdsim
 * (clusters, device profiles, calibration measurements and the fit made
 * of them, traces plain and gzip, torch.profiler traces and their replay, sweep files, schedule files, model
 * files) and the
 * option values with a syntax of their own (--slow, --slow-link,
 * --stage-times), fed arbitrary bytes.  The same entry points serve libFuzzer
 * (fuzz_main.c, built by tools/fuzz with clang) and the regression test
 * (tests/test_fuzz_corpus.c, built by every compiler), which replays the
 * shipped files and fuzz/regressions/TARGET/ through them. */
#pragma once

#include <glib.h>

/* trace-gz: the bytes as a gzip trace file (NAME.json.gz), as report and
 * figure --from-traces read them; fit: measurements fitted into a profile
 * on the A100's (ptdsim fit's default base for them), which must load. */
/* The most bytes of an option value the value targets read (a value is
 * one command-line word; the cap keeps a sanitized run fast). */
#define FUZZ_VALUE_MAX 4096

typedef enum {
  FUZZ_CLUSTER,
  FUZZ_PROFILE,
  FUZZ_MEASUREMENTS,
  FUZZ_TRACE,
  FUZZ_SWEEP,
  FUZZ_TRACE_GZ,
  FUZZ_FIT,
  FUZZ_SCHEDULE, /* a --schedule-file CSV: 2 bytes choose p and m, the rest is the file */
  FUZZ_SLOW,        /* a --slow value (the first FUZZ_VALUE_MAX bytes), run where accepted */
  FUZZ_SLOW_LINK,   /* a --slow-link value, likewise */
  FUZZ_STAGE_TIMES, /* a --stage-times value, likewise */
  FUZZ_PROFILER_TRACE, /* a torch.profiler trace (plain or gzip) and the step's figures made of it */
  FUZZ_REPLAY,         /* a torch.profiler trace replayed on the engine, as measured and under CUDA graphs */
  FUZZ_MODEL,          /* a --model FILE: ptdsim's model JSON or a Hugging Face config.json */
  FUZZ_N_TARGETS
} FuzzTarget;

const char *fuzz_target_name(FuzzTarget t);
/* The target of that name, or -1. */
gint fuzz_target_find(const char *name);
/* Shipped files that make the target's seed corpus: paths relative to the
 * data directory, NULL-terminated. */
const char *const *fuzz_target_seeds(FuzzTarget t);

/* Makes GLib's critical warnings fatal: a g_return_if_fail tripped by an
 * input is a defect, as the engine's refused ops once were. */
void fuzz_init(void);
/* Feeds one input to the target.  Returns for any input ptdsim handles,
 * accepted or refused with an error; aborts, after a line on stderr, on a
 * defect it can see: an accepted input whose simulated run reports a
 * negative, NaN, infinite or null number, or a fitted profile that does
 * not load (sanitizers see the rest). */
void fuzz_target_run(FuzzTarget t, const guint8 *data, gsize size);
