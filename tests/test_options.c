/* ptdsim — unit tests of search/options.c: the spelling of a token budget
 * in the `ptdsim run` commands it prints, and the request of values it
 * reads from the words and texts, once. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "../plan/validate.h"
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

/* Why: the request carries values, read from the words once at the edge,
 * and the trace writes the words back from the values.  Every word of
 * every worded option must come out of search_config_request as its value,
 * marked given, and its value's word must be that word; an option not given
 * stays not given. */
static void test_words_typed(void) {
  static const char *const base[][2] = {{"model", "gpt3-1b"}, {"gpus", "8"}, {"global-batch", "8"}};
  static const SearchOptId ids[] = {SEARCH_OPT_SCHEDULE,  SEARCH_OPT_DDP,       SEARCH_OPT_RECOMPUTE,
                                    SEARCH_OPT_NETWORK,   SEARCH_OPT_PLACEMENT, SEARCH_OPT_WORKLOAD,
                                    SEARCH_OPT_ATTENTION, SEARCH_OPT_PRECISION, SEARCH_OPT_FSDP_REDUCE_DTYPE,
                                    SEARCH_OPT_FSDP_RESHARD, SEARCH_OPT_MOE_TOKEN_DISPATCHER};
  for (guint i = 0; i < G_N_ELEMENTS(ids); i++) {
    const PtdWord *words = search_option(ids[i])->words;
    g_assert_nonnull(words);
    guint n = 0;
    for (const PtdWord *w = words; w->word; w++, n++) {
      SearchConfig c;
      search_config_init(&c);
      for (guint k = 0; k < G_N_ELEMENTS(base); k++)
        g_assert_true(search_config_set(&c, search_option_find(base[k][0]), base[k][1], NULL));
      g_assert_true(search_config_set(&c, ids[i], w->word, NULL));
      SimPlanRequest r;
      GError *error = NULL;
      g_assert_true(search_config_request(&c, &r, &error));
      g_assert_no_error(error);
      int value = -1;
      gboolean given = FALSE;
      switch (ids[i]) {
      case SEARCH_OPT_SCHEDULE:
        value = r.schedule, given = r.schedule_given;
        g_assert_cmpstr(sim_schedule_name(r.schedule), ==, w->word);
        break;
      case SEARCH_OPT_DDP:
        value = r.ddp, given = r.ddp_given;
        break;
      case SEARCH_OPT_RECOMPUTE:
        value = r.recompute, given = r.recompute_given;
        break;
      case SEARCH_OPT_NETWORK:
        value = r.network, given = r.network_given;
        break;
      case SEARCH_OPT_PLACEMENT:
        value = r.placement, given = r.placement_given;
        break;
      case SEARCH_OPT_WORKLOAD:
        value = r.workload, given = r.workload_given;
        break;
      case SEARCH_OPT_ATTENTION:
        value = r.attention, given = r.attention_given;
        break;
      case SEARCH_OPT_PRECISION:
        value = r.precision, given = r.precision_given;
        break;
      case SEARCH_OPT_FSDP_REDUCE_DTYPE:
        value = r.fsdp_reduce_dtype, given = r.fsdp_reduce_dtype_given;
        break;
      case SEARCH_OPT_FSDP_RESHARD:
        value = r.fsdp_reshard, given = r.fsdp_reshard_given;
        break;
      default:
        value = r.moe_dispatcher, given = r.moe_dispatcher_given;
        break;
      }
      g_assert_true(given);
      g_assert_cmpint(value, ==, w->value);
      g_assert_cmpstr(ptd_word_of(words, value), ==, w->word);
      /* no other option became given */
      g_assert_true(ids[i] == SEARCH_OPT_DDP || !r.ddp_given);
      g_assert_true(ids[i] == SEARCH_OPT_SCHEDULE || !r.schedule_given);
      g_assert_true(ids[i] == SEARCH_OPT_PRECISION || !r.precision_given);
      search_config_clear(&c);
    }
    g_assert_cmpuint(n, >=, 2);
  }
}

/* Why: the values a request carries are read from the text once; --slices,
 * --stage-times and the stragglers come out as numbers, and a word no run
 * takes (plan's --schedule all) is refused with the words that are. */
static void test_values_parsed(void) {
  SearchConfig c;
  search_config_init(&c);
  g_assert_true(search_config_set(&c, SEARCH_OPT_MODEL, "gpt3-1b", NULL));
  g_assert_true(search_config_set(&c, SEARCH_OPT_GPUS, "8", NULL));
  g_assert_true(search_config_set(&c, SEARCH_OPT_GLOBAL_BATCH, "8", NULL));
  g_assert_true(search_config_set(&c, SEARCH_OPT_SLICES, "512,1024,512", NULL));
  g_assert_true(search_config_set(&c, SEARCH_OPT_STAGE_TIMES, "1.5,2,0.25,0", NULL));
  g_assert_true(search_config_set(&c, SEARCH_OPT_SLOW, "3=0.5,node:1=0.75,stage:2=1", NULL));
  g_assert_true(search_config_set(&c, SEARCH_OPT_SLOW_LINK, "rail:1=0", NULL));
  g_assert_true(search_config_set(&c, SEARCH_OPT_GPU_SPEED, "lognormal:0.125", NULL));
  SimPlanRequest r;
  g_assert_true(search_config_request(&c, &r, NULL));
  g_assert_true(r.slices_given);
  g_assert_cmpint(r.slices_mode, ==, SIM_SLICES_LIST);
  g_assert_cmpuint(r.n_slices, ==, 3);
  g_assert_cmpuint(r.slice_len[0], ==, 512);
  g_assert_cmpuint(r.slice_len[1], ==, 1024);
  g_assert_cmpuint(r.slice_len[2], ==, 512);
  g_assert_true(r.stage_times);
  g_assert_cmpfloat(r.stage_times_ms[0], ==, 1.5);
  g_assert_cmpfloat(r.stage_times_ms[1], ==, 2);
  g_assert_cmpfloat(r.stage_times_ms[2], ==, 0.25);
  g_assert_cmpfloat(r.stage_times_ms[3], ==, 0);
  g_assert_cmpuint(r.stragglers.n_gpu, ==, 3);
  g_assert_cmpint(r.stragglers.gpu[1].kind, ==, SIM_SLOW_NODE);
  g_assert_cmpuint(r.stragglers.gpu[1].index, ==, 1);
  g_assert_cmpfloat(r.stragglers.gpu[1].factor, ==, 0.75);
  g_assert_cmpint(r.stragglers.gpu[2].kind, ==, SIM_SLOW_STAGE);
  g_assert_cmpuint(r.stragglers.n_link, ==, 1);
  g_assert_cmpint(r.stragglers.link[0].kind, ==, SIM_SLOW_RAIL);
  g_assert_cmpfloat(r.stragglers.link[0].factor, ==, 0);
  g_assert_cmpfloat(r.stragglers.sigma, ==, 0.125);
  char *text = sim_slices_text(&r);
  g_assert_cmpstr(text, ==, "512,1024,512");
  g_free(text);
  r.slices_text = NULL; /* made by hand: written from the values */
  r.slices_mode = SIM_SLICES_UNIFORM, r.n_slices = 4;
  text = sim_slices_text(&r);
  g_assert_cmpstr(text, ==, "uniform:4");
  g_free(text);
  g_assert_true(search_config_set(&c, SEARCH_OPT_SCHEDULE, "all", NULL)); /* plan's word */
  GError *error = NULL;
  g_assert_false(search_config_request(&c, &r, &error));
  g_assert_nonnull(strstr(error->message, "unknown --schedule 'all'; use gpipe, 1f1b,"));
  g_assert_true(g_str_has_suffix(error->message, "dualpipev or terapipe"));
  g_error_free(error);
  search_config_clear(&c);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/options/tokens-round-trip", test_tokens_round_trip);
  g_test_add_func("/options/tokens-round-trip-sweep", test_tokens_round_trip_sweep);
  g_test_add_func("/options/words-typed", test_words_typed);
  g_test_add_func("/options/values-parsed", test_values_parsed);
  return g_test_run();
}
