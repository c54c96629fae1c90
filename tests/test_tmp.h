/* ptdsim — the test programs' temporary folders: made in $TMPDIR and
 * removed with everything in them when the program ends, also when a
 * failed assertion aborts it, so that a failing test leaves nothing
 * behind in the temporary folder either. */
#pragma once

#include <glib.h>

/* A new folder $TMPDIR/PREFIX-XXXXXX (asserted made); the caller frees
 * the string. */
char *test_tmp_dir(const char *prefix);
/* Removes a folder and everything in it (nothing where it is gone). */
void test_rm_rf(const char *path);
