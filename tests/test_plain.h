/* ptdsim — cases the sanitizer build leaves to the plain one.  A few
 * end-to-end cases are expensive (whole figures saved as traces, long
 * op-by-op runs) and run 5-6 times slower under AddressSanitizer at -O0;
 * meson sets PTDSIM_TEST_PLAIN_ONLY=skip in a build with sanitizers, where
 * those cases are skipped (and say so in the TAP output), and every build
 * without them runs every case. */
#pragma once

#include <glib.h>
#include <string.h>

/* Whether this is a sanitizer build (which leaves expensive cases out). */
static inline gboolean test_sanitized(void) {
  const char *v = g_getenv("PTDSIM_TEST_PLAIN_ONLY");
  return v && strcmp(v, "skip") == 0;
}

/* TRUE (and the test marked skipped) in a sanitizer build: the caller
 * returns. */
static inline gboolean test_plain_only(const char *what) {
  if (!test_sanitized())
    return FALSE;
  char *msg = g_strdup_printf("%s: expensive end to end, run by the plain build only", what);
  g_test_skip(msg);
  g_free(msg);
  return TRUE;
}
