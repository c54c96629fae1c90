/* ptdsim — what each `sweep --set` key moves: every number of a cluster or
 * device-profile file by its JSON path, with one line saying what in a run
 * depends on it (`ptdsim sweep --list-keys`). */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

/* What the --set key (cluster.PATH or profile.PATH) moves, or NULL where
 * ptdsim has no line for it. */
const char *search_set_key_doc(const char *key);
/* Every number of `cluster` and `profile` (their files as read) that --set
 * can change (object paths; numbers inside lists are not settable), one
 * per line: the key, its value and what it moves; each part headed by where
 * its file came from (g_free it). */
char *search_set_keys_list(const cJSON *cluster, const char *cluster_from, const cJSON *profile,
                           const char *profile_from);
