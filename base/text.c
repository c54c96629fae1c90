/* ptdsim — text echoed in messages (see text.h). */
#include "text.h"

#include <string.h>

char *ptd_echo(const char *s, gsize max, gboolean keep_utf8) {
  if (!s)
    s = "";
  gsize len = strlen(s);
  GString *out = g_string_sized_new(MIN(len, max) + 16);
  const char *p = s, *end = s + MIN(len, max);
  while (p < end) {
    guchar c = (guchar)*p;
    if (c >= 0x20 && c < 0x7f && (c != '\\' || keep_utf8)) {
      g_string_append_c(out, (char)c);
      p++;
      continue;
    }
    if (c >= 0x80 && keep_utf8) {
      gunichar u = g_utf8_get_char_validated(p, end - p);
      if (u != (gunichar)-1 && u != (gunichar)-2 && g_unichar_isprint(u)) {
        const char *next = g_utf8_next_char(p);
        g_string_append_len(out, p, next - p);
        p = next;
        continue;
      }
    }
    g_string_append_printf(out, "\\x%02x", c);
    p++;
  }
  if (len > max)
    g_string_append_printf(out, "... (%zu more bytes)", len - max);
  return g_string_free(out, FALSE);
}

const char *ptd_word_of(const PtdWord *set, int value) {
  for (const PtdWord *w = set; w->word; w++)
    if (w->value == value)
      return w->word;
  return NULL;
}

gboolean ptd_word_value(const PtdWord *set, const char *word, int *value) {
  for (const PtdWord *w = set; word && w->word; w++)
    if (strcmp(w->word, word) == 0) {
      *value = w->value;
      return TRUE;
    }
  return FALSE;
}

char *ptd_word_list(const PtdWord *set) {
  GString *s = g_string_new(NULL);
  for (const PtdWord *w = set; w->word; w++)
    g_string_append_printf(s, "%s%s", w == set ? "" : w[1].word ? ", " : " or ", w->word);
  return g_string_free(s, FALSE);
}
