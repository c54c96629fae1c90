/* ptdsim — numbers for people: SI prefixes when printing, count suffixes
 * when reading.  Conversions happen at the edges only; everything inside
 * is in SI units (bytes, seconds, tokens). */
#pragma once

#include <glib.h>

/* Writes `value` with an SI prefix so that 1 <= mantissa < 1000 (k, M, G,
 * T, P, E), one decimal, a space and the unit: 3.08e14 B -> "307.9 TB",
 * 461e9 B/s -> "461.0 GB/s", 12 B -> "12.0 B".  Returns buf. */
const char *ptd_format_si(double value, const char *unit, char *buf, gsize size);

/* Writes a count with the suffixes used for model and data sizes (K
 * thousand, M million, B billion, T trillion), one decimal: 1.0e12 ->
 * "1.0T", 4.5e11 -> "450.0B", 512 -> "512".  Returns buf. */
const char *ptd_format_count(double value, char *buf, gsize size);

/* Reads a positive count written as a decimal number, with an optional
 * exponent or one suffix K, M, B or T (either case): "300e9", "300B",
 * "1.2T", "2048".  FALSE (and *out untouched) on anything else: empty
 * text, signs, junk after the number, NaN or infinity, zero or less. */
gboolean ptd_parse_count(const char *text, double *out);

/* Reads a real number written in decimal: an optional '-', digits with an
 * optional '.' and fraction (or '.' and digits), an optional exponent
 * (e or E, an optional sign, digits), and nothing else — no space before
 * or after, no '+', no hexadecimal (strtod reads 0x1p3), no inf or nan.
 * FALSE (and *out untouched) on anything else, or when it overflows. */
gboolean ptd_parse_real(const char *text, double *out);

/* Reads a whole number written in decimal digits only: no sign, no space,
 * no leading zero ("0" itself is 0), no exponent, at most `max`.  FALSE
 * (and *out untouched) on anything else. */
gboolean ptd_parse_whole(const char *text, guint64 max, guint64 *out);
