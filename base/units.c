/* ptdsim — numbers for people (see units.h). */
#include "units.h"

#include <math.h>
#include <string.h>

const char *ptd_format_si(double value, const char *unit, char *buf, gsize size) {
  static const char *prefix[] = {"", "k", "M", "G", "T", "P", "E"};
  guint i = 0;
  double v = value;
  /* Round first, so that 999.96 GB prints as 1.0 TB and not as 1000.0 GB. */
  while (i + 1 < G_N_ELEMENTS(prefix) && fabs(round(v * 10) / 10) >= 1000) {
    v /= 1000;
    i++;
  }
  g_snprintf(buf, size, "%.1f %s%s", v, prefix[i], unit);
  return buf;
}

const char *ptd_format_count(double value, char *buf, gsize size) {
  static const struct {
    double scale;
    const char *suffix;
  } steps[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (guint i = 0; i < G_N_ELEMENTS(steps); i++)
    if (fabs(round(value / steps[i].scale * 10) / 10) >= 1) {
      g_snprintf(buf, size, "%.1f%s", value / steps[i].scale, steps[i].suffix);
      return buf;
    }
  g_snprintf(buf, size, "%.0f", value);
  return buf;
}

gboolean ptd_parse_count(const char *text, double *out) {
  /* Decimal only: no sign, no leading space, no hexadecimal (strtod reads 0x...). */
  if (!text || (!g_ascii_isdigit(text[0]) && text[0] != '.') || strpbrk(text, "xX"))
    return FALSE;
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  if (end == text)
    return FALSE;
  double scale = 1;
  switch (g_ascii_toupper(*end)) {
  case 'K':
    scale = 1e3;
    break;
  case 'M':
    scale = 1e6;
    break;
  case 'B':
    scale = 1e9;
    break;
  case 'T':
    scale = 1e12;
    break;
  default:
    break;
  }
  if (scale > 1)
    end++;
  v *= scale;
  if (*end != '\0' || !isfinite(v) || v <= 0)
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean ptd_parse_real(const char *text, double *out) {
  if (!text)
    return FALSE;
  const char *p = text;
  if (*p == '-')
    p++;
  gsize whole = strspn(p, "0123456789");
  p += whole;
  gsize frac = 0;
  if (*p == '.') {
    p++;
    frac = strspn(p, "0123456789");
    p += frac;
  }
  if (whole + frac == 0)
    return FALSE;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-')
      p++;
    gsize exp = strspn(p, "0123456789");
    if (exp == 0)
      return FALSE;
    p += exp;
  }
  if (*p)
    return FALSE;
  char *end = NULL;
  double v = g_ascii_strtod(text, &end);
  if (end != p || !isfinite(v))
    return FALSE;
  *out = v;
  return TRUE;
}

gboolean ptd_parse_whole(const char *text, guint64 max, guint64 *out) {
  if (!text || !g_ascii_isdigit(text[0]) || (text[0] == '0' && text[1]))
    return FALSE;
  guint64 v = 0;
  for (const char *p = text; *p; p++) {
    if (!g_ascii_isdigit(*p))
      return FALSE;
    guint d = (guint)(*p - '0');
    if (d > max || v > (max - d) / 10)
      return FALSE;
    v = v * 10 + d;
  }
  *out = v;
  return TRUE;
}
