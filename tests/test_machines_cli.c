/* ptdsim — the built-in machines of today (B200, H200, H800 and the
 * clouds' H100 nodes, the GB200 NVL72's 72-GPU NVLink domain) end to end
 * through the real binary ($PTDSIM_BIN):
 * each runs GPT-3 175B and Llama 3 70B on both network models, `ptdsim
 * clusters` lists and shows them, and every number of their files says
 * where it comes from. */
#include <cjson/cJSON.h>
#include <glib.h>
#include <math.h>
#include <string.h>

#include "cli_harness.h"

static const char *const clusters[] = {"dgx-h200", "dgx-b200", "gb200-nvl72", "h800-cluster", "p5.48xlarge",
                                       "a3-mega", "nd-h100-v5"};
static const char *const profiles[] = {"b200", "gb200", "h800"};

static double iteration(const char *model, const char *gpus_etc, const char *cluster, const char *network) {
  char *args = g_strdup_printf("run --model %s %s --cluster %s --network %s --format json", model, gpus_etc, cluster,
                               network);
  cJSON *j = run_json(args);
  const cJSON *cfg = obj(j, "config");
  g_assert_cmpstr(str(cfg, "cluster"), ==, cluster);
  g_assert_cmpstr(str(cfg, "network"), ==, network);
  g_assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "fits_in_memory")));
  /* the cluster's own profile, not the default selene's */
  cJSON *c = load_shipped("topologies", cluster);
  g_assert_cmpstr(str(cfg, "profile"), ==, str(c, "gpu_profile"));
  cJSON_Delete(c);
  double t = num(j, "iteration_time_s");
  g_assert_cmpfloat(t, >, 0);
  cJSON_Delete(j);
  g_free(args);
  return t;
}

#define GPT3 "--gpus 128 --tp 8 --pp 8 --global-batch 32 --micro-batch 1"
#define LLAMA "--gpus 64 --tp 8 --pp 4 --global-batch 32 --micro-batch 1"

/* Why: a built-in cluster is only worth shipping if the two models people
 * train on it run end to end under both network models, and the two
 * models agree closely where nothing contends. */
static void test_runs(void) {
  for (guint i = 0; i < G_N_ELEMENTS(clusters); i++) {
    const char *const models[][2] = {{"gpt3-175b", GPT3}, {"llama3-70b", LLAMA}};
    for (guint m = 0; m < G_N_ELEMENTS(models); m++) {
      double a = iteration(models[m][0], models[m][1], clusters[i], "analytic");
      double f = iteration(models[m][0], models[m][1], clusters[i], "flow");
      g_test_message("%s %s: analytic %.4f s, flow %.4f s", clusters[i], models[m][0], a, f);
      g_assert_cmpfloat(fabs(f - a) / a, <, 0.1);
    }
  }
}

/* Why: the numbers must move the answer the way the hardware does: a B200
 * node trains faster than an H100 node, an H200 (same compute, more
 * memory) about as fast, and the H800's 400 GB/s NVLink makes the same
 * tensor-parallel run slower than on the H100's 900 GB/s. */
static void test_ordering(void) {
  double h100 = iteration("llama3-70b", LLAMA, "dgx-h100-superpod", "analytic");
  g_assert_cmpfloat(iteration("llama3-70b", LLAMA, "dgx-b200", "analytic"), <, 0.7 * h100);
  g_assert_cmpfloat(iteration("llama3-70b", LLAMA, "h800-cluster", "analytic"), >, 1.1 * h100);
  g_assert_cmpfloat(fabs(iteration("llama3-70b", LLAMA, "dgx-h200", "analytic") - h100) / h100, <, 0.1);
}

static gboolean listed(const cJSON *list, const char *name) {
  const cJSON *e;
  cJSON_ArrayForEach(e, list) if (strcmp(str(e, "name"), name) == 0) return TRUE;
  return FALSE;
}

/* Why: `ptdsim clusters` is how a user finds the machines; it must list
 * every one, with the sizes its file gives. */
static void test_list(void) {
  cJSON *j = run_json("clusters --format json");
  const cJSON *cl = arr(j, "clusters"), *pr = arr(j, "profiles");
  for (guint i = 0; i < G_N_ELEMENTS(clusters); i++) {
    g_assert_true(listed(cl, clusters[i]));
    cJSON *file = load_shipped("topologies", clusters[i]);
    const cJSON *e;
    cJSON_ArrayForEach(e, cl) if (strcmp(str(e, "name"), clusters[i]) == 0) {
      g_assert_cmpfloat(num(e, "nodes"), ==, num(file, "nodes"));
      g_assert_cmpfloat(num(e, "gpus_per_node"), ==, num(file, "gpus_per_node"));
      g_assert_cmpfloat(num(e, "nics_per_node"), ==, num(file, "nics_per_node"));
      g_assert_cmpfloat(num(e, "nic_GBps"), ==, num(obj(file, "network"), "nic_GBps"));
      g_assert_cmpstr(str(obj(e, "profile"), "name"), ==, str(file, "gpu_profile"));
    }
    cJSON_Delete(file);
  }
  for (guint i = 0; i < G_N_ELEMENTS(profiles); i++)
    g_assert_true(listed(pr, profiles[i]));
  cJSON_Delete(j);
  Proc p = run_line("clusters");
  g_assert_cmpint(p.status, ==, 0);
  for (guint i = 0; i < G_N_ELEMENTS(clusters); i++) {
    char *line = g_strdup_printf("\n%s ", clusters[i]);
    g_assert_nonnull(strstr(p.out, line));
    g_free(line);
  }
  proc_clear(&p);
}

/* Why: `ptdsim clusters NAME` is where a number's source is read: every
 * provenance entry of the file must be printed, word for word. */
static void test_show(void) {
  for (guint k = 0; k < 2; k++) {
    const char *const *names = k ? profiles : clusters;
    guint n = k ? G_N_ELEMENTS(profiles) : G_N_ELEMENTS(clusters);
    for (guint i = 0; i < n; i++) {
      char *args = g_strdup_printf("clusters %s", names[i]);
      Proc p = run_line(args);
      g_assert_cmpint(p.status, ==, 0);
      cJSON *file = load_shipped(k ? "calibrate/profiles" : "topologies", names[i]);
      const cJSON *e;
      guint entries = 0;
      cJSON_ArrayForEach(e, obj(file, "provenance")) {
        if (!strstr(p.out, e->valuestring))
          g_error("clusters %s does not print the provenance of '%s'", names[i], e->string);
        entries++;
      }
      g_assert_cmpuint(entries, >=, 10);
      cJSON_Delete(file);
      proc_clear(&p);
      g_free(args);
    }
  }
}

/* The key paths of `node` below `path` that neither have a provenance entry
 * nor lie inside an object that has one, appended to `missing`. */
static void uncovered(const cJSON *node, const char *path, const cJSON *prov, GString *missing) {
  if (*path && cJSON_GetObjectItemCaseSensitive(prov, path))
    return;
  if (!cJSON_IsObject(node)) {
    g_string_append_printf(missing, "%s ", path);
    return;
  }
  for (const cJSON *c = node->child; c; c = c->next) {
    if (!*path && (!strcmp(c->string, "name") || !strcmp(c->string, "description") ||
                   !strcmp(c->string, "provenance") || !strcmp(c->string, "kind")))
      continue;
    char *sub = *path ? g_strdup_printf("%s.%s", path, c->string) : g_strdup(c->string);
    uncovered(c, sub, prov, missing);
    g_free(sub);
  }
}

/* Why: a number without a source cannot be checked; every key of the new
 * clusters and profiles must have a provenance entry (its own or its
 * block's). The check itself must catch a key without one. */
static void test_provenance_coverage(void) {
  GString *missing = g_string_new(NULL);
  cJSON *bad = cJSON_Parse("{\"name\": \"x\", \"provenance\": {\"a\": \"s\", \"b.c\": \"s\"},"
                           " \"a\": {\"q\": 1}, \"b\": {\"c\": 2, \"d\": 3}, \"e\": [1]}");
  uncovered(bad, "", obj(bad, "provenance"), missing);
  g_assert_cmpstr(missing->str, ==, "b.d e ");
  cJSON_Delete(bad);
  for (guint k = 0; k < 2; k++) {
    const char *const *names = k ? profiles : clusters;
    guint n = k ? G_N_ELEMENTS(profiles) : G_N_ELEMENTS(clusters);
    for (guint i = 0; i < n; i++) {
      cJSON *file = load_shipped(k ? "calibrate/profiles" : "topologies", names[i]);
      g_string_truncate(missing, 0);
      uncovered(file, "", obj(file, "provenance"), missing);
      if (missing->len)
        g_error("%s: no provenance for %s", names[i], missing->str);
      cJSON_Delete(file);
    }
  }
  g_string_free(missing, TRUE);
}

/* Why: a mistyped name must say so in one line, not list nothing or crash. */
static void test_bad_name(void) {
  Proc p = run_line("clusters dgx-b300");
  assert_one_line_error(&p, "no built-in cluster or profile named 'dgx-b300'");
  proc_clear(&p);
  p = run_line("clusters dgx-b200 extra");
  assert_one_line_error(&p, "at most one name");
  proc_clear(&p);
  p = run_line("run --model llama3-70b --cluster dgx-b300 --gpus 8 --tp 8 --global-batch 8 --micro-batch 1");
  assert_one_line_error(&p, "no cluster named 'dgx-b300'");
  proc_clear(&p);
}


static double tp_comm(const char *cluster) {
  char *args = g_strdup_printf("run --model gpt3-175b --gpus 1024 --tp 16 --pp 8 --global-batch 512 --micro-batch 1 "
                               "--cluster %s --network flow --format json",
                               cluster);
  cJSON *j = run_json(args);
  double t = num(obj(j, "time_breakdown_s"), "tp_comm");
  cJSON_Delete(j);
  g_free(args);
  return t;
}

/* Why: tensor parallelism across 72 GPUs on NVLink is why people buy an
 * NVL72.  A tensor-parallel group of 16 stays inside a rack's NVLink domain
 * (the collective table says one domain of 16), where on 8-GPU DGX B200
 * nodes of the same NVLink5 it crosses InfiniBand: the same run's
 * tensor-parallel time is far lower on the NVL72. */
static void test_nvl72_domain(void) {
  Proc p = run_line("collective --op allreduce --gpus 16 --min-bytes 64M --max-bytes 64M --cluster gb200-nvl72");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "(1 node x 16 GPUs)"));
  proc_clear(&p);
  p = run_line("collective --op allreduce --gpus 16 --min-bytes 64M --max-bytes 64M --cluster dgx-b200");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "(2 nodes x 8 GPUs)"));
  proc_clear(&p);
  double nvl = tp_comm("gb200-nvl72"), dgx = tp_comm("dgx-b200");
  g_test_message("t 16: tensor-parallel time %.3f s on gb200-nvl72, %.3f s on dgx-b200", nvl, dgx);
  g_assert_cmpfloat(nvl, <, 0.5 * dgx);
  /* 64 groups of 16, four to a rack, fill the 16 racks; 65 do not fit */
  p = run_line("run --model gpt3-175b --gpus 1040 --tp 16 --pp 65 --global-batch 65 --micro-batch 1 --layers 65 "
               "--cluster gb200-nvl72");
  assert_one_line_error(&p, "packed 4 to an NVLink domain of 72 GPUs");
  proc_clear(&p);
  /* plan searches t up to the domain: on the NVL72 it may take 16, on a DGX never */
  cJSON *j = run_json("plan --model gpt3-175b --gpus 1024 --global-batch 1024 --tp 16 --cluster gb200-nvl72 "
                      "--network analytic --format json --top 1");
  g_assert_cmpfloat(num(cJSON_GetArrayItem(arr(j, "rows"), 0), "tp"), ==, 16);
  cJSON_Delete(j);
}

/* Why: a cloud's cluster is booked by the node; --nodes sizes any cluster
 * for run and plan (as sweep's --set cluster.nodes=N), and a size the
 * cluster cannot take is one line naming --nodes. */
static void test_nodes(void) {
  const char *run = "run --model llama3-70b --gpus 1024 --tp 8 --pp 4 --global-batch 256 --micro-batch 1 "
                    "--cluster p5.48xlarge --network analytic --format json";
  Proc p = run_line(run);
  assert_one_line_error(&p, "--nodes N");
  proc_clear(&p);
  char *args = g_strconcat(run, " --nodes 128", NULL);
  cJSON *j = run_json(args);
  g_assert_cmpfloat(num(obj(j, "config"), "gpus"), ==, 1024);
  cJSON_Delete(j);
  g_free(args);
  p = run_line("run --model gpt3-175b --gpus 1024 --tp 8 --pp 8 --global-batch 1024 --cluster gb200-nvl72 "
               "--nodes 100");
  assert_one_line_error(&p, "--nodes 100 does not fit the cluster");
  proc_clear(&p);
  p = run_line("run --model gpt3-175b --gpus 1024 --tp 8 --pp 8 --global-batch 1024 --cluster dgx-b200 "
               "--nodes 40000");
  assert_one_line_error(&p, "more than the 262144");
  proc_clear(&p);
  p = run_line("sweep --model llama3-70b --gpus 1024 --tp 8 --pp 4 --global-batch 256 --micro-batch 1 "
               "--cluster p5.48xlarge --network analytic --nodes 64,128");
  g_assert_cmpint(p.status, ==, 0);
  g_assert_nonnull(strstr(p.out, "cluster.nodes"));
  /* 64 nodes hold 512 GPUs: that row cannot run, the other does */
  g_assert_nonnull(strstr(p.out, "invalid"));
  g_assert_nonnull(strstr(p.out, ",ok"));
  proc_clear(&p);
}

/* Why: Blackwell has FP4 tensor cores, but nothing here prices them: the
 * refusal says so instead of an unknown word. */
static void test_fp4(void) {
  Proc p = run_line("run --model llama3-70b --gpus 64 --tp 8 --pp 4 --global-batch 32 --cluster dgx-b200 "
                    "--precision fp4");
  assert_one_line_error(&p, "--precision fp4 is not priced");
  proc_clear(&p);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  if (!cli_harness_init())
    return 1;
  g_assert_nonnull(g_getenv("PTDSIM_DATA_DIR")); /* the source tree, where the shipped files are read */
  g_test_add_func("/machines/runs", test_runs);
  g_test_add_func("/machines/ordering", test_ordering);
  g_test_add_func("/machines/list", test_list);
  g_test_add_func("/machines/show", test_show);
  g_test_add_func("/machines/provenance-coverage", test_provenance_coverage);
  g_test_add_func("/machines/bad-name", test_bad_name);
  g_test_add_func("/machines/nvl72-domain", test_nvl72_domain);
  g_test_add_func("/machines/nodes", test_nodes);
  g_test_add_func("/machines/fp4", test_fp4);
  return g_test_run();
}
