#include "layout.h"

#include <string.h>

#include "../base/text.h"
#include "plan.h"

#define OPT "--pipeline-model-parallel-layout"

static gboolean fail(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean fail(GError **error, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, msg);
  g_free(msg);
  return FALSE;
}

/* Digits at s: their value (saturated above the cap) and their end; FALSE
 * where none. */
static gboolean digits(const char *s, guint64 *value, const char **end) {
  if (!g_ascii_isdigit(*s))
    return FALSE;
  guint64 v = 0;
  for (; g_ascii_isdigit(*s); s++)
    v = MIN(v * 10 + (guint64)(*s - '0'), (guint64)SIM_LAYOUT_MAX_ITEMS * 2 + 1);
  *value = v;
  *end = s;
  return TRUE;
}

/* Appends `piece` n times, refusing a result longer than the cap. */
static gboolean repeat(GString *out, const char *piece, gsize len, guint64 n, GError **error) {
  gint64 room = (gint64)SIM_LAYOUT_MAX_ITEMS * 2 - (gint64)out->len;
  if (room < 0 || (guint64)n * len > (guint64)room)
    return fail(error,
                OPT " unrolls to more than %u characters; write each repeat with the count it needs (the model's layers "
                    "at most)",
                SIM_LAYOUT_MAX_ITEMS * 2);
  for (guint64 i = 0; i < n; i++)
    g_string_append_len(out, piece, (gssize)len);
  return TRUE;
}

/* Megatron-Core's first unrolling, re.sub(r'\(([^)]+)\)\*(\d+)', ...): at
 * each place, an opening parenthesis, at least one character up to the
 * next closing one, '*' and digits make the characters between repeated;
 * the scan goes on after what was replaced. */
static char *unroll_groups(const char *s, GError **error) {
  GString *out = g_string_new(NULL);
  while (*s) {
    if (*s == '(') {
      const char *close = strchr(s + 1, ')');
      guint64 n;
      const char *end;
      if (close && close > s + 1 && close[1] == '*' && digits(close + 2, &n, &end)) {
        if (!repeat(out, s + 1, (gsize)(close - s - 1), n, error)) {
          g_string_free(out, TRUE);
          return NULL;
        }
        s = end;
        continue;
      }
    }
    g_string_append_c(out, *s++);
  }
  return g_string_free(out, FALSE);
}

/* The second, re.sub(r'(.)\*(\d+)', ...): a character (not a newline)
 * followed by '*' and digits, repeated. */
static char *unroll_chars(const char *s, GError **error) {
  GString *out = g_string_new(NULL);
  while (*s) {
    guint64 n;
    const char *end;
    if (*s != '\n' && s[1] == '*' && digits(s + 2, &n, &end)) {
      if (!repeat(out, s, 1, n, error)) {
        g_string_free(out, TRUE);
        return NULL;
      }
      s = end;
      continue;
    }
    g_string_append_c(out, *s++);
  }
  return g_string_free(out, FALSE);
}

static void layout_free(gpointer p) {
  SimLayout *l = p;
  g_free(l->t);
  g_free(l->mtp);
  g_free(l->text);
  g_free(l);
}

static SimLayout *layout_build(const char *text, GError **error) {
  char *echo = ptd_echo(text, PTD_ECHO_MAX, TRUE);
  if (!*text) {
    fail(error, OPT " is empty; give the model's pieces per virtual stage, e.g. \"Et*3|(tt|)*29,m|L\"");
    g_free(echo);
    return NULL;
  }
  /* commas are cosmetic */
  GString *plain = g_string_new(NULL);
  for (const char *c = text; *c; c++)
    if (*c != ',')
      g_string_append_c(plain, *c);
  char *groups = unroll_groups(plain->str, error);
  g_string_free(plain, TRUE);
  char *flat = groups ? unroll_chars(groups, error) : NULL;
  g_free(groups);
  if (!flat) {
    g_free(echo);
    return NULL;
  }
  SimLayout *l = g_new0(SimLayout, 1);
  l->n = 1;
  for (const char *c = flat; *c; c++)
    l->n += *c == '|';
  l->t = g_new0(guint, l->n);
  l->mtp = g_new0(guint, l->n);
  l->text = g_strdup(text);
  l->mtp_vs = G_MAXUINT;
  guint vs = 0, embs = 0, losses = 0, emb_vs = 0, loss_vs = 0;
  gboolean ok = TRUE;
  char first = 0, last = 0;
  gboolean mtp_before_t = FALSE;
  for (const char *c = flat; *c && ok; c++) {
    if (*c == '|') {
      vs++;
      continue;
    }
    if (!strchr("EtmL", *c)) {
      char *bad = ptd_echo((char[]){*c, 0}, 8, FALSE);
      ok = fail(error,
                OPT " '%s': '%s' is no layer; use E (the embedding), t (a transformer layer), m (an MTP module), L "
                    "(the loss), '|' between virtual stages, (...)*N and x*N to repeat (Megatron-Core's syntax; no "
                    "nested parentheses)",
                echo, bad);
      g_free(bad);
      break;
    }
    if (!first)
      first = *c;
    last = *c;
    switch (*c) {
    case 'E':
      embs++;
      emb_vs = vs;
      break;
    case 'L':
      losses++;
      loss_vs = vs;
      break;
    case 't':
      l->t[vs]++;
      l->layers++;
      mtp_before_t = mtp_before_t || l->mtps > 0;
      break;
    default: /* 'm' */
      if (l->mtps && l->mtp_vs != vs)
        ok = fail(error,
                  OPT " '%s' puts MTP modules in virtual stages %u and %u; Megatron-Core keeps them all in one "
                      "virtual stage",
                  echo, l->mtp_vs, vs);
      l->mtp[vs]++;
      l->mtps++;
      l->mtp_vs = vs;
      break;
    }
  }
  g_free(flat);
  /* pipeline_parallel_layer_layout.py's validate_layer_layout, the rules
   * that need no model */
  if (ok && (embs != 1 || first != 'E'))
    ok = fail(error, OPT " '%s' %s; the model's first piece is its embedding, once: begin with E", echo,
              embs == 0 ? "has no E" : embs > 1 ? "has more than one E" : "begins with something before E");
  if (ok && (losses != 1 || last != 'L'))
    ok = fail(error, OPT " '%s' %s; the model's last piece is its loss, once: end with L", echo,
              losses == 0 ? "has no L" : losses > 1 ? "has more than one L" : "puts something after L");
  if (ok && (emb_vs != 0 || loss_vs != l->n - 1))
    ok = fail(error,
              OPT " '%s' has an empty virtual stage %s; ptdsim runs the embedding in the first virtual stage and the "
                  "loss in the last: drop the empty ones",
              echo, emb_vs != 0 ? "before E" : "after L");
  if (ok && mtp_before_t)
    ok = fail(error, OPT " '%s' has transformer layers after an MTP module; the MTP modules (m) follow every t", echo);
  g_free(echo);
  if (!ok) {
    layout_free(l);
    return NULL;
  }
  return l;
}

const SimLayout *sim_layout_parse(const char *text, GError **error) {
  static GMutex lock;
  static GHashTable *cache; /* text -> SimLayout, alive for the process */
  g_mutex_lock(&lock);
  if (!cache)
    cache = g_hash_table_new(g_str_hash, g_str_equal);
  SimLayout *l = g_hash_table_lookup(cache, text);
  if (!l && (l = layout_build(text, error)))
    g_hash_table_insert(cache, l->text, l);
  g_mutex_unlock(&lock);
  return l;
}

/* A piece's letters: E, t's, m's, L, repeats written x*N. */
static void piece(GString *s, gboolean emb, guint t, guint mtp, gboolean loss) {
  if (emb)
    g_string_append_c(s, 'E');
  if (t == 1 || t == 2)
    g_string_append(s, t == 1 ? "t" : "tt");
  else if (t)
    g_string_append_printf(s, "t*%u", t);
  if (mtp == 1)
    g_string_append_c(s, 'm');
  else if (mtp)
    g_string_append_printf(s, "m*%u", mtp);
  if (loss)
    g_string_append_c(s, 'L');
}

char *sim_layout_write(const guint *t, guint n, guint mtp) {
  GString *s = g_string_new(NULL);
  for (guint k = 0; k < n;) {
    /* a run of equal pieces in the middle, written (piece|)*N */
    guint r = 1;
    if (k > 0)
      while (k + r < n - 1 && t[k + r] == t[k])
        r++;
    GString *one = g_string_new(NULL);
    piece(one, k == 0, t[k], k == n - 1 ? mtp : 0, k == n - 1);
    if (r > 1 && k + r <= n - 1) {
      g_string_append_printf(s, "(%s|)*%u", one->str, r);
      if (k + r < n)
        g_string_append_c(s, ',');
    } else {
      g_string_append(s, one->str);
      if (k + 1 < n)
        g_string_append_c(s, '|');
    }
    g_string_free(one, TRUE);
    k += r;
  }
  return g_string_free(s, FALSE);
}
