/* ptdsim — text a user gave, echoed back in a message: escaped and capped,
 * so that a line on stderr stays one line of printable text whatever bytes
 * (a control byte, invalid UTF-8, a megabyte-long list) it quotes. */
#pragma once

#include <glib.h>

/* The longest part of a user's value a message quotes, in bytes. */
#define PTD_ECHO_MAX 200

/* A copy of `s` (NULL: "") for a message: control bytes and bytes outside
 * printable ASCII as \xNN, and backslashes too (so the escape reads back) —
 * except where `keep_utf8` (a path, a whole message), which keeps valid
 * printable UTF-8 and backslashes as they are — and, past `max` bytes of
 * input, "..." and the count of the bytes left out.  Free with g_free. */
char *ptd_echo(const char *s, gsize max, gboolean keep_utf8);

/* A word of a closed set (an option's value) and what it stands for; a
 * set is an array ended by a NULL word, in the order messages list it. */
typedef struct {
  const char *word;
  int value;
} PtdWord;
/* The word of `value` in `set` (NULL: none), and the value of `word`
 * (FALSE: not in the set). */
const char *ptd_word_of(const PtdWord *set, int value);
gboolean ptd_word_value(const PtdWord *set, const char *word, int *value);
/* The set's words as "a, b or c".  Free with g_free. */
char *ptd_word_list(const PtdWord *set);
