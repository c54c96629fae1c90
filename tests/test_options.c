/* ptdsim — unit tests of search/options.c's spelling of a token budget in
 * the `ptdsim run` commands it prints. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../search/options.h"

/* The text search_tokens_append writes for `v`. */
static char *spelled(double v) {
  GString *s = g_string_new(NULL);
  search_tokens_append(s, v);
  return g_string_free(s, FALSE);
}

/* Why: a reproducing command must give back the very budget it came from,
 * and people write budgets as 15T, 300B, 1.2T: each value is written with
 * the largest suffix that leaves a mantissa of at least 1 and the fewest
 * decimals, and search_tokens reads it back to the identical double; where
 * no such spelling exists (too many digits, below a million) the exact
 * number is written, which reads back too. */
static void test_tokens_round_trip(void) {
  static const struct {
    const char *given; /* as a user types it */
    const char *want;  /* as a command prints it */
  } cases[] = {
      {"15e12", "15T"},         {"15T", "15T"},          {"300e9", "300B"},
      {"300B", "300B"},         {"1.2e12", "1.2T"},      {"1.2T", "1.2T"},
      {"1500e9", "1.5T"},       {"999e9", "999B"},       {"1.25T", "1.25T"},
      {"2.125T", "2.125T"},     {"0.5T", "500B"},        {"2.5e6", "2.5M"},
      {"450M", "450M"},         {"1e17", "100000T"},     {"3.6T", "3.6T"},
      {"1e12", "1T"},           {"1000000", "1M"},       {"0.1T", "100B"},
      /* fallbacks: the exact number */
      {"2048", "2048"},         {"999999", "999999"},    {"2048K", "2.048M"},
      {"123456789012", "123456789012"},                  {"1.2345T", "1234500000000"},
      {"0.5", "0.5"},           {"1000001", "1000001"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    double v = 0, back = 0;
    g_assert_true(search_tokens(cases[i].given, &v, NULL));
    char *text = spelled(v);
    g_test_message("%s -> %s", cases[i].given, text);
    g_assert_cmpstr(text, ==, cases[i].want);
    g_assert_true(search_tokens(text, &back, NULL));
    g_assert_true(back == v);
    g_free(text);
  }
  /* a value one ulp away from 1.2T is not 1.2T */
  double off = g_ascii_strtod("1.2e12", NULL);
  off = nextafter(off, 2e12);
  char *text = spelled(off);
  double back = 0;
  g_assert_cmpstr(text, !=, "1.2T");
  g_assert_true(search_tokens(text, &back, NULL));
  g_assert_true(back == off);
  g_free(text);
}

/* Why: every value a user can give reads back identically, whatever its
 * spelling: a sweep of mantissas and suffixes, fallbacks included. */
static void test_tokens_round_trip_sweep(void) {
  static const char *const suffixes[] = {"", "K", "M", "B", "T"};
  guint fallbacks = 0, n = 0;
  for (guint m = 1; m <= 20000; m += 7)
    for (guint k = 0; k < G_N_ELEMENTS(suffixes); k++)
      for (guint d = 0; d <= 3; d++) {
        char given[48];
        g_snprintf(given, sizeof given, "%.*f%s", d, m / 1000.0 * (d == 0 ? 1000 : 1), suffixes[k]);
        double v = 0, back = 0;
        if (!search_tokens(given, &v, NULL))
          continue;
        char *text = spelled(v);
        g_assert_true(search_tokens(text, &back, NULL));
        if (back != v)
          g_test_message("%s -> %s -> %.17g", given, text, back);
        g_assert_true(back == v);
        fallbacks += g_ascii_isdigit(text[strlen(text) - 1]);
        n++;
        g_free(text);
      }
  g_assert_cmpuint(n, >, 1000);
  g_assert_cmpuint(fallbacks, >, 0);
  g_assert_cmpuint(fallbacks, <, n);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/options/tokens-round-trip", test_tokens_round_trip);
  g_test_add_func("/options/tokens-round-trip-sweep", test_tokens_round_trip_sweep);
  return g_test_run();
}
