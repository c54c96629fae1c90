/* ptdsim — the ground floor: numbers for people (base/units.h). */
#include <glib.h>
#include <math.h>

#include "../base/units.h"

static void check_si(double v, const char *unit, const char *want) {
  char buf[32];
  g_assert_cmpstr(ptd_format_si(v, unit, buf, sizeof buf), ==, want);
}

/* Why: a report prints 307.9 TB, not 307863.3 GB; the prefix is chosen
 * after rounding, so 999.96 GB is 1.0 TB and never 1000.0 GB. */
static void test_format_si(void) {
  check_si(307863.3e9, "B", "307.9 TB");
  check_si(38963.9e9, "B", "39.0 TB");
  check_si(461e9, "B/s", "461.0 GB/s");
  check_si(2.5e9, "B", "2.5 GB");
  check_si(999.96e9, "B", "1.0 TB");
  check_si(999.94e9, "B", "999.9 GB");
  check_si(12, "B", "12.0 B");
  check_si(0, "B/s", "0.0 B/s");
  check_si(1e3, "B", "1.0 kB");
  check_si(5e21, "B", "5000.0 EB"); /* past the last prefix it stays in E */
}

static void check_count(double v, const char *want) {
  char buf[32];
  g_assert_cmpstr(ptd_format_count(v, buf, sizeof buf), ==, want);
}

/* Why: token budgets print the way people say them. */
static void test_format_count(void) {
  check_count(1.0e12, "1.0T");
  check_count(4.5e11, "450.0B");
  check_count(300e9, "300.0B");
  check_count(999.96e9, "1.0T");
  check_count(2.5e6, "2.5M");
  check_count(2048, "2.0K");
  check_count(512, "512");
}

/* Why: "300e9", "300B" and "1.2T" are one number each; anything else is
 * refused whole, never read in part. */
static void test_parse_count(void) {
  const struct {
    const char *text;
    double value;
  } good[] = {{"300e9", 300e9}, {"300B", 300e9}, {"300b", 300e9}, {"1.2T", 1.2e12}, {"1.2t", 1.2e12},
              {"450M", 450e6}, {"2K", 2e3},       {"2048", 2048},   {".5T", 0.5e12},  {"1e12", 1e12}};
  for (guint i = 0; i < G_N_ELEMENTS(good); i++) {
    double v = -1;
    g_assert_true(ptd_parse_count(good[i].text, &v));
    g_assert_cmpfloat(v, ==, good[i].value);
  }
  const char *bad[] = {"", "B", "300x", "3BT", "-5", "+5", " 5", "5 ", "0", "0B", "0x10", "inf", "nan", "1e999",
                       "1.2.3", "1e", "300G"};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    double v = 7;
    if (ptd_parse_count(bad[i], &v))
      g_test_fail_printf("'%s' was accepted as %g", bad[i], v);
    g_assert_cmpfloat(v, ==, 7); /* untouched */
  }
  g_assert_false(ptd_parse_count(NULL, NULL));
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/base/format-si", test_format_si);
  g_test_add_func("/base/format-count", test_format_count);
  g_test_add_func("/base/parse-count", test_parse_count);
  return g_test_run();
}
