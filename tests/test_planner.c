/* ptdsim — the search behind `ptdsim plan` (search/planner.c) in-process:
 * the lower bound it prunes with is never above the simulated iteration
 * time, and a search that prunes ranks exactly the rows of one that
 * simulates everything, having simulated fewer.  Small spaces: each search
 * takes well under a second. */
#include <glib.h>
#include <string.h>

#include "../search/planner.h"

/* A toy GPT (8 layers) on 16 GPUs: a few hundred to a few thousand
 * candidates, every schedule family among them with --schedule all. */
#define TOY "layers=8 hidden=1024 heads=16 seq-len=512 global-batch=8 gpus=8"

typedef struct {
  SearchConfig cfg;
  TopoCluster *cluster;
  ModelProfile *profile;
} Space;

/* "opt=value opt flag ..." (a flag has no '='), with the cluster's own
 * profile unless profile= is given. */
static void space_init(Space *sp, const char *opts) {
  search_config_init(&sp->cfg);
  char **words = g_strsplit(opts, " ", -1);
  for (char **w = words; *w; w++) {
    if (!**w)
      continue;
    char *eq = strchr(*w, '=');
    if (eq)
      *eq = '\0';
    gint id = search_option_find(*w);
    g_assert_cmpint(id, >=, 0);
    GError *err = NULL;
    g_assert_true(search_config_set(&sp->cfg, (SearchOptId)id, eq ? eq + 1 : NULL, &err));
    g_assert_no_error(err);
  }
  g_strfreev(words);
  GError *err = NULL;
  const char *cl = sp->cfg.text[SEARCH_OPT_CLUSTER], *pr = sp->cfg.text[SEARCH_OPT_PROFILE];
  sp->cluster = topo_cluster_load(cl ? cl : "selene", &err);
  g_assert_no_error(err);
  sp->profile = model_profile_load(pr ? pr : sp->cluster->gpu_profile, &err);
  g_assert_no_error(err);
}

static void space_clear(Space *sp) {
  search_config_clear(&sp->cfg);
  topo_cluster_free(sp->cluster);
  model_profile_free(sp->profile);
}

static void search(const Space *sp, guint keep, SearchResult *res) {
  SearchRequest req = {&sp->cfg, FALSE, keep, 1, FALSE, SEARCH_OBJECTIVE_TIME};
  GError *err = NULL;
  gboolean ok = search_run(&req, sp->profile, sp->cluster, res, &err);
  g_assert_no_error(err);
  g_assert_true(ok);
}

/* Spaces that reach every term of the bound and every case that drops one:
 * schedule families, recomputation, sequence parallelism, the distributed
 * optimizer and FSDP2, the flow network, overlapped tensor-parallel GEMMs,
 * placements, a domain that t does not divide, stragglers, the ideal
 * profile, context parallelism, ZeRO and MoE (FLOPs at peak). */
static const char *const spaces[] = {
    TOY " gpus=4 schedule=all",
    "layers=4 hidden=1024 heads=16 seq-len=512 global-batch=4 gpus=4 network=flow",
    TOY " tp-comm-overlap",
    TOY " ddp=torch",
    TOY " placement=dp-outermost",
    TOY " placement=misaligned",
    TOY " ddp=torch overlap-param-gather",
    TOY " gpus=4 profile=ideal schedule=all",
    TOY " slow=3=0.5",
    TOY " cluster=gb200-nvl72 gpus=16 global-batch=16",
    "layers=8 hidden=1024 heads=16 seq-len=16384 global-batch=4 gpus=16 cluster=dgx-h100-superpod",
    "model=gpt3-1b gpus=8 global-batch=8",
    "model=mixtral-8x7b layers=4 gpus=8 global-batch=8 cluster=dgx-h100-superpod",
};

/* Why: a candidate is pruned when its bound is above the K-th best time; a
 * bound above its own simulated time could prune a row of the top K. */
static void test_bound_below_time(void) {
  for (guint i = 0; i < G_N_ELEMENTS(spaces); i++) {
    Space sp;
    space_init(&sp, spaces[i]);
    SearchResult res;
    search(&sp, 1000000, &res); /* a bound for every row, nothing pruned */
    g_assert_cmpuint(res.pruned, ==, 0);
    g_assert_cmpuint(res.rows->len, >, 0);
    for (guint r = 0; r < res.rows->len; r++) {
      const SearchRow *row = &g_array_index(res.rows, SearchRow, r);
      if (!(row->bound_s <= row->iteration_time_s && row->bound_s > 0))
        g_error("%s: a bound of %.9f s above (or not below) the simulated %.9f s: %s", spaces[i], row->bound_s,
                row->iteration_time_s, search_config_command(&row->config));
    }
    search_result_clear(&res);
    space_clear(&sp);
  }
}

/* Why: the bound is what makes pruning fire; it must be tight where the
 * simulator's time is nothing but what it counts (one GPU, no pipeline, no
 * data parallelism: compute and the optimizer step), within its rounding. */
static void test_bound_tight(void) {
  Space sp;
  space_init(&sp, "layers=8 hidden=1024 heads=16 seq-len=512 global-batch=8 gpus=1 tp=1 pp=1");
  SearchResult res;
  search(&sp, 1000000, &res);
  g_assert_cmpuint(res.rows->len, >, 0); /* else the loop below checks nothing */
  for (guint r = 0; r < res.rows->len; r++) {
    const SearchRow *row = &g_array_index(res.rows, SearchRow, r);
    g_assert_cmpfloat(row->iteration_time_s - row->bound_s, <, 1e-3 * row->iteration_time_s);
  }
  search_result_clear(&res);
  space_clear(&sp);
}

/* Why: --top K must rank exactly the first K rows of the search that
 * simulates everything, field for field and command for command, and the
 * pruning must fire (else the comparison proves nothing). */
static void test_pruned_equals_full(void) {
  const char *const pruned_spaces[] = {TOY " gpus=4 schedule=all", "model=gpt3-1b gpus=8 global-batch=8",
                                       TOY " cluster=gb200-nvl72 gpus=16 global-batch=16"};
  for (guint i = 0; i < G_N_ELEMENTS(pruned_spaces); i++) {
    Space sp;
    space_init(&sp, pruned_spaces[i]);
    SearchResult full;
    search(&sp, 0, &full);
    const guint ks[] = {1, 5};
    for (guint ki = 0; ki < G_N_ELEMENTS(ks); ki++) {
      SearchResult few;
      search(&sp, ks[ki], &few);
      g_assert_cmpuint(few.searched, ==, full.searched);
      g_assert_cmpuint(few.out_of_memory, ==, full.out_of_memory);
      g_assert_cmpuint(few.simulated + few.pruned, ==, full.simulated);
      g_assert_cmpuint(few.pruned, >, 0);
      g_assert_cmpuint(few.simulated * 2, <, full.simulated);
      g_assert_cmpuint(few.rows->len, >=, ks[ki]);
      for (guint r = 0; r < ks[ki]; r++) {
        const SearchRow *a = &g_array_index(few.rows, SearchRow, r), *b = &g_array_index(full.rows, SearchRow, r);
        g_assert_cmpint(search_row_cmp(a, b), ==, 0);
        g_assert_true(memcmp(&a->iteration_time_s, &b->iteration_time_s, sizeof(double)) == 0);
        char *ca = search_config_command(&a->config), *cb = search_config_command(&b->config);
        g_assert_cmpstr(ca, ==, cb);
        g_free(ca);
        g_free(cb);
      }
      search_result_clear(&few);
    }
    search_result_clear(&full);
    space_clear(&sp);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/planner/bound-below-time", test_bound_below_time);
  g_test_add_func("/planner/bound-tight", test_bound_tight);
  g_test_add_func("/planner/pruned-equals-full", test_pruned_equals_full);
  return g_test_run();
}
