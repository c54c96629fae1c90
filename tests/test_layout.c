/* Unit tests of the pipeline layout (plan/layout.h): Megatron-Core's own
 * layout examples (tests/unit_tests/transformer/test_transformer_block.py,
 * tests/unit_tests/pipeline_parallel/test_pipeline_layout.py and
 * docs/user-guide/features/pipeline_parallel_layout.md at NVIDIA/Megatron-LM
 * d98e8a6) parsed to the pieces their tests expect, each validation rule of
 * pipeline_parallel_layer_layout.py refused with its one-line error, the
 * placement of each piece on (stage, chunk) under Megatron's loop, the V
 * and DualPipe's two directions, and the layout written from a split read
 * back to the same split. */
#include <string.h>

#include "../plan/layout.h"
#include "../plan/route.h"
#include "../plan/validate.h"

static TopoCluster *selene;

typedef struct {
  const char *text;
  guint n;
  guint t[40]; /* transformer layers per virtual stage (the rest 0) */
  guint mtp_vs, mtps;
} ParseCase;

/* Why: the parser must read Megatron-Core's strings as its
 * parse_str_to_list does -- commas dropped, (...)*N and x*N unrolled, '|'
 * between virtual stages, empty stages kept. */
static void test_megatron_examples(void) {
  static const ParseCase cases[] = {
      /* test_parsing_layout_from_str */
      {"Et|t*4|t|tL", 4, {1, 4, 1, 1}, G_MAXUINT, 0},
      {"E|t*6|t|L", 4, {0, 6, 1, 0}, G_MAXUINT, 0},
      {"E|t|t*2|t||(t|)*2,t*2,L", 8, {0, 1, 2, 1, 0, 1, 1, 2}, G_MAXUINT, 0},
      {"Et*3|(tt|)*29,m|L",
       32,
       {3, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 0},
       30,
       1},
      {"Et*2|(tt|)*29,t|mL",
       32,
       {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1, 0},
       31,
       1},
      /* test_forward_vpp's MTP placements */
      {"E|t*3|(t|)*5mL", 8, {0, 3, 1, 1, 1, 1, 1, 0}, 7, 1},
      {"E|t*3|(t|)*4tm|L", 8, {0, 3, 1, 1, 1, 1, 1, 0}, 6, 1},
      {"E|t*3|(t|)*3tt|m|L", 8, {0, 3, 1, 1, 1, 2, 0, 0}, 6, 1},
      /* the DeepSeek-V3 proxy's functional test */
      {"Et*7|t*7mL", 2, {7, 7}, 1, 1},
      /* the docs' empty stage */
      {"E||t|L", 4, {0, 0, 1, 0}, G_MAXUINT, 0},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    const ParseCase *c = &cases[i];
    GError *error = NULL;
    const SimLayout *l = sim_layout_parse(c->text, &error);
    g_assert_no_error(error);
    g_assert_nonnull(l);
    g_assert_cmpuint(l->n, ==, c->n);
    guint sum = 0;
    for (guint k = 0; k < l->n; k++) {
      g_assert_cmpuint(l->t[k], ==, c->t[k]);
      sum += c->t[k];
      g_assert_cmpuint(l->mtp[k], ==, k == c->mtp_vs ? c->mtps : 0);
    }
    g_assert_cmpuint(l->layers, ==, sum);
    g_assert_cmpuint(l->mtps, ==, c->mtps);
    g_assert_cmpuint(l->mtp_vs, ==, c->mtp_vs);
    g_assert_cmpstr(l->text, ==, c->text);
    g_assert_true(sim_layout_parse(c->text, NULL) == l); /* kept for the process */
  }
}

typedef struct {
  const char *text, *mention;
} BadCase;

/* Why: each rule of validate_layer_layout (and the syntax) refused in one
 * line that names it, never a partial layout. */
static void test_refusals(void) {
  static const BadCase cases[] = {
      {"", "is empty"},
      {"tE|L", "begins with something before E"},
      {"t|L", "has no E"},
      {"E|Et|L", "more than one E"},
      {"Et|t", "has no L"},
      {"EtL|t", "puts something after L"},
      {"Et|tL|L", "more than one L"},
      {"Etm|t|L", "transformer layers after an MTP module"},
      {"Et|m|mL", "MTP modules in virtual stages 1 and 2"},
      {"Et|x|L", "'x' is no layer"},
      {"Et| t|L", "' ' is no layer"},
      {"E((t|)*2)*2|L", "'(' is no layer"},
      {"Et*99999999999999|L", "unrolls to more than"},
      {"(Et|)*100000L", "unrolls to more than"},
      {"|Et|L", "empty virtual stage before E"},
      {"Et|tL|", "empty virtual stage after L"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    GError *error = NULL;
    if (sim_layout_parse(cases[i].text, &error))
      g_error("'%s' is accepted", cases[i].text);
    g_assert_nonnull(error);
    if (!strstr(error->message, cases[i].mention))
      g_error("'%s': '%s' does not say '%s'", cases[i].text, error->message, cases[i].mention);
    g_assert_null(strchr(error->message, '\n'));
    g_error_free(error);
  }
}

/* A plan of an 8-layer GPT (or `layers`; DeepSeek-V3 cut to them with `mtp` MTP modules) on Selene, p stages of `schedule`
 * with `layout`; FALSE with the error where it is refused. */
static gboolean layout_plan(const char *schedule, guint layers, guint p, guint chunks, const char *layout, guint mtp,
                            SimPlan *plan, GError **error) {
  SimPlanRequest r = {0};
  r.model = (ModelShape){.layers = layers, .hidden = 1024, .heads = 16, .seq_len = 1024, .vocab = 51200};
  if (mtp) { /* multi-token prediction as DeepSeek-V3 runs it, on its mixture of experts */
    g_assert_true(model_lookup("deepseek-v3", &r.model));
    r.model.layers = layers;
    r.model.seq_len = 1024;
    r.model.mtp = mtp;
  }
  r.tp = 1;
  r.pp = p;
  r.gpus = p;
  r.micro_batch = 1;
  r.global_batch = 4 * p;
  r.chunks = chunks;
  if (schedule) {
    r.schedule = sim_schedule_find(schedule)->id;
    r.schedule_given = TRUE;
  }
  r.layout = layout;
  r.allow_oom = TRUE;
  return sim_plan_build(&r, selene, plan, error);
}

/* Why: Megatron-Core numbers the layers of chunk c of rank s by the list's
 * order, c p + s (test_layout_layer_number's golden answer, 1-based there:
 * rank 0 [[], []], rank 1 [[1], [5]], rank 2 [[2, 3], [6]], rank 3 [[4],
 * [7, 8]]); the layout also sets the chunks and the interleaved schedule. */
static void test_layer_numbers(void) {
  SimPlan pl;
  GError *error = NULL;
  g_assert_true(layout_plan(NULL, 8, 4, 0, "E|t|t*2|t||(t|)*2,t*2,L", 0, &pl, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(pl.chunks, ==, 2);
  g_assert_true(pl.schedule == SIM_SCHEDULE_INTERLEAVED);
  static const guint first[4][2] = {{0, 4}, {0, 4}, {1, 5}, {3, 6}}, count[4][2] = {{0, 0}, {1, 1}, {2, 1}, {1, 2}};
  for (guint s = 0; s < 4; s++)
    for (guint c = 0; c < 2; c++) {
      g_assert_cmpuint(sim_plan_chunk_layers(&pl, s, c), ==, count[s][c]);
      if (count[s][c])
        g_assert_cmpuint(sim_plan_chunk_first_layer(&pl, s, c), ==, first[s][c]);
      g_assert_cmpuint(sim_plan_chunk_vstage(&pl, s, c), ==, c * 4 + s);
    }
  g_assert_cmpuint(sim_plan_stage_layers(&pl, 3), ==, 3);
  g_assert_true(sim_plan_uneven(&pl));
}

/* Why: the k-th piece runs where the schedule puts the k-th virtual stage
 * of the route: the V's stage 0 holds pieces 0 and 2p - 1; DualPipe's
 * rank s holds piece s going down and piece p - 1 - s going up. */
static void test_placements(void) {
  SimPlan pl;
  GError *error = NULL;
  /* zb-v on 4 stages: pieces 0..7 hold 0, 1, ..., 7 layers less the ends */
  g_assert_true(layout_plan("zb-v", 28, 4, 0, "E|t|tt|t*3|t*4|t*5|t*6|t*7L", 0, &pl, &error));
  g_assert_no_error(error);
  for (guint s = 0; s < 4; s++) {
    g_assert_cmpuint(sim_plan_chunk_layers(&pl, s, 0), ==, s);
    g_assert_cmpuint(sim_plan_chunk_layers(&pl, s, 1), ==, 7 - s);
    g_assert_cmpuint(sim_plan_chunk_first_layer(&pl, s, 1), ==, (7 - s) * (6 - s) / 2);
  }
  /* dualpipe on 4 stages: 4 pieces, each rank two of them */
  g_assert_true(layout_plan("dualpipe", 22, 4, 0, "Et*4|t*5|t*6|t*7L", 0, &pl, &error));
  g_assert_no_error(error);
  for (guint s = 0; s < 4; s++) {
    g_assert_cmpuint(sim_plan_chunk_layers(&pl, s, 0), ==, 4 + s);
    g_assert_cmpuint(sim_plan_chunk_layers(&pl, s, 1), ==, 7 - s);
    g_assert_cmpuint(sim_plan_stage_layers(&pl, s), ==, 11);
  }
  /* the MTP module in a virtual stage of its own, where a rank's last chunk is */
  g_assert_true(layout_plan(NULL, 8, 4, 0, "E|t*3|(t|)*3tt|m|L", 1, &pl, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(sim_plan_mtp_vstage(&pl), ==, 6);
  /* an MTP module runs as DeepSeek-V3's, an MoE layer: a dense model with one is refused */
  SimPlanRequest r = {0};
  r.model = (ModelShape){.layers = 8, .hidden = 1024, .heads = 16, .seq_len = 1024, .vocab = 51200, .mtp = 1};
  r.tp = r.pp = r.gpus = r.micro_batch = r.global_batch = 1;
  g_assert_false(sim_plan_build(&r, selene, &pl, &error));
  g_assert_nonnull(strstr(error->message, "modelled on mixture-of-experts models"));
  g_clear_error(&error);
}

typedef struct {
  const char *schedule;
  guint layers, p, chunks;
  const char *layout;
  guint mtp;
  const char *mention; /* NULL: accepted */
} PlanCase;

/* Why: the rules that need the model and the pipeline
 * (PipelineParallelLayerLayout.__init__ and validate_layer_layout, and
 * test_layer_builder's cases of 7 layers on 2 ranks): as many pieces as
 * virtual stages, every layer once, the MTP modules in a rank's last
 * chunk; one line each. */
static void test_plan_rules(void) {
  static const PlanCase cases[] = {
      {NULL, 7, 2, 0, "Et|t*4|t|tL", 0, NULL},       /* the usual pp case, two chunks */
      {NULL, 7, 2, 0, "E|t*7||L", 0, NULL},          /* an empty stage */
      {NULL, 7, 2, 0, "E|t*6|t|L", 0, NULL},         /* standalone embedding and loss */
      {NULL, 7, 2, 0, "Et|t*4|ttL", 0, "lists 3 virtual stages"},
      {"1f1b", 7, 2, 0, "Et|t*4|t|tL", 0, "add --schedule interleaved"},
      {"interleaved", 7, 2, 4, "Et|t*4|t|tL", 0, "list 8"},
      {NULL, 7, 2, 0, "Et|t*4|t|ttL", 0, "holds 8 transformer layers (t) and 0 MTP modules (m), the model 7 and 0"},
      {NULL, 8, 4, 0, "E|t*3|(t|)*3tt|m|L", 0, "the model 8 and 0"},
      {NULL, 8, 4, 0, "E|t*3|t|m|(t|)*3,t|L", 1, "transformer layers after an MTP module"},
      {NULL, 8, 4, 0, "E|t*3|t|t*4m||||L", 1, "model chunk 0 of rank 3"},
      {"dualpipe", 22, 4, 0, "Et*4|t*5|t*6|t*7L", 0, NULL},
      {"dualpipe", 22, 4, 0, "Et*2|t*2|t*3|t*3|t*3|t*3|t*3|t*3L", 0, "rank s holds piece s and piece p - 1 - s"},
      {"zb-v", 22, 4, 0, "Et*4|t*5|t*6|t*7L", 0, "list 8"},
      {"terapipe", 8, 4, 0, "Et*2|tt|tt|ttL", 0, "for PTD-P"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    const PlanCase *c = &cases[i];
    SimPlan pl;
    GError *error = NULL;
    gboolean ok = layout_plan(c->schedule, c->layers, c->p, c->chunks, c->layout, c->mtp, &pl, &error);
    if (!c->mention) {
      g_assert_no_error(error);
      g_assert_true(ok);
      continue;
    }
    g_assert_false(ok);
    g_assert_nonnull(error);
    if (!strstr(error->message, c->mention))
      g_error("case %u '%s': '%s' does not say '%s'", i, c->layout, error->message, c->mention);
    g_assert_null(strchr(error->message, '\n'));
    g_error_free(error);
  }
}

/* Why: the split options are shorthands for layouts: the layout written
 * from a split, read back, gives each chunk the same layers. */
static void test_written_round_trip(void) {
  static const struct {
    SimSplit split;
    guint layers, p, chunks;
    const char *want;
  } cases[] = {
      {{0, 0, TRUE, TRUE}, 126, 16, 2, "Et*3|(t*4|)*30,t*3L"},
      {{3, 2, FALSE, FALSE}, 61, 16, 0, "Et*3|(t*4|)*14,ttL"},
      {{7, 7, FALSE, FALSE}, 126, 9, 0, "Et*7|(t*16|)*7,t*7L"},
      {{0, 0, TRUE, FALSE}, 31, 4, 0, "Et*7|(t*8|)*2,t*8L"},
      {{0, 0, FALSE, FALSE}, 8, 2, 0, "Et*4|t*4L"},
  };
  for (guint i = 0; i < G_N_ELEMENTS(cases); i++) {
    SimPlanRequest r = {0};
    r.model = (ModelShape){.layers = cases[i].layers, .hidden = 1024, .heads = 16, .seq_len = 1024, .vocab = 51200};
    r.tp = 1;
    r.pp = cases[i].p;
    r.gpus = cases[i].p;
    r.micro_batch = 1;
    r.global_batch = 4 * cases[i].p;
    r.chunks = cases[i].chunks;
    r.split = cases[i].split;
    r.allow_oom = TRUE;
    SimPlan a, b;
    GError *error = NULL;
    g_assert_true(sim_plan_build(&r, selene, &a, &error));
    g_assert_no_error(error);
    char *text = sim_plan_layout_text(&a);
    g_assert_cmpstr(text, ==, cases[i].want);
    r.split = (SimSplit){0};
    r.chunks = 0;
    r.layout = text;
    g_assert_true(sim_plan_build(&r, selene, &b, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(a.chunks, ==, b.chunks);
    for (guint s = 0; s < a.pp; s++)
      for (guint c = 0; c < a.chunks; c++) {
        g_assert_cmpuint(sim_plan_chunk_layers(&a, s, c), ==, sim_plan_chunk_layers(&b, s, c));
        g_assert_cmpuint(sim_plan_chunk_first_layer(&a, s, c), ==, sim_plan_chunk_first_layer(&b, s, c));
      }
    g_free(text);
  }
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  GError *error = NULL;
  selene = topo_cluster_load("selene", &error);
  g_assert_no_error(error);
  g_test_add_func("/layout/megatron-examples", test_megatron_examples);
  g_test_add_func("/layout/refusals", test_refusals);
  g_test_add_func("/layout/layer-numbers", test_layer_numbers);
  g_test_add_func("/layout/placements", test_placements);
  g_test_add_func("/layout/plan-rules", test_plan_rules);
  g_test_add_func("/layout/written-round-trip", test_written_round_trip);
  int rc = g_test_run();
  topo_cluster_free(selene);
  return rc;
}
