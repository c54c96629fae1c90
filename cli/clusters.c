/* ptdsim clusters — the built-in clusters and device profiles: what each
 * node holds, how fast its links and GPUs are, and (for one, by name or by
 * a file's path) every number of its file with the source its provenance
 * gives. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../models/profile.h"
#include "../topologies/cluster.h"

#define CLUSTERS_DIR "topologies"
#define PROFILES_DIR "calibrate/profiles"

static gint by_name(gconstpointer a, gconstpointer b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The shipped names of `subdir` (its *.json files), sorted. */
static GPtrArray *shipped(const char *subdir) {
  GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
  char *dir = g_build_filename(ptd_data_dir(), subdir, NULL);
  GDir *d = g_dir_open(dir, 0, NULL);
  if (d) {
    for (const char *e; (e = g_dir_read_name(d));)
      if (g_str_has_suffix(e, ".json"))
        g_ptr_array_add(names, g_strndup(e, strlen(e) - 5));
    g_dir_close(d);
  }
  g_free(dir);
  g_ptr_array_sort(names, by_name);
  return names;
}

static gboolean is_shipped(const char *subdir, const char *name) {
  GPtrArray *names = shipped(subdir);
  gboolean found = FALSE;
  for (guint i = 0; i < names->len && !found; i++)
    found = strcmp(g_ptr_array_index(names, i), name) == 0;
  g_ptr_array_free(names, TRUE);
  return found;
}

/* The number at a dotted key path of `root`; NAN where there is none. */
static double num_at(const cJSON *root, const char *path) {
  char **keys = g_strsplit(path, ".", -1);
  const cJSON *o = root;
  for (char **k = keys; *k && o; k++)
    o = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, *k) : NULL;
  g_strfreev(keys);
  return cJSON_IsNumber(o) ? o->valuedouble : NAN;
}

static void add_num(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
}

/* One profile's summary: peaks (TFLOP/s), memory, HBM, SMs, precisions. */
static cJSON *profile_summary(const char *name, const ModelProfile *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", name);
  cJSON_AddNumberToObject(o, "peak_tflops", p->peak_flops / 1e12);
  if (model_profile_supports(p, "fp8"))
    cJSON_AddNumberToObject(o, "peak_fp8_tflops", p->peak_fp8_flops / 1e12);
  cJSON_AddNumberToObject(o, "memory_GiB", p->memory_bytes / (1024.0 * 1024.0 * 1024.0));
  cJSON_AddNumberToObject(o, "hbm_GBps", p->hbm_bytes_per_s / 1e9);
  cJSON_AddNumberToObject(o, "sms", p->sms);
  cJSON *prec = cJSON_AddArrayToObject(o, "precisions");
  for (guint i = 0; i < p->n_precisions; i++)
    cJSON_AddItemToArray(prec, cJSON_CreateString(p->precisions[i]));
  return o;
}

/* One cluster's summary: sizes, NICs (line rate and what NCCL reaches),
 * NVLink (per direction per GPU and the ring busbw), and its profile's. */
static cJSON *cluster_summary(const char *name, const TopoCluster *c, const ModelProfile *p) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", name);
  cJSON_AddNumberToObject(o, "nodes", topo_cluster_gpus(c) / c->gpus_per_host);
  cJSON_AddNumberToObject(o, "gpus_per_node", c->gpus_per_host);
  cJSON_AddNumberToObject(o, "gpus", topo_cluster_gpus(c));
  cJSON_AddNumberToObject(o, "nvlink_domain_gpus", c->gpus_per_node);
  add_num(o, "nics_per_node", num_at(c->json, "nics_per_node"));
  add_num(o, "nic_link_Gbps", num_at(c->json, "fabric.network.link_GBps") * 8);
  cJSON_AddNumberToObject(o, "nic_GBps", c->net.nic_bw / 1e9);
  add_num(o, "nvlink_GBps_per_direction", num_at(c->json, "fabric.node.nvswitch.GBps"));
  cJSON_AddNumberToObject(o, "nvlink_allreduce_busbw_GBps", c->net.nvlink_busbw / 1e9);
  const cJSON *kind = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c->json, "fabric"), "network");
  kind = cJSON_GetObjectItemCaseSensitive(kind, "kind");
  cJSON_AddStringToObject(o, "network", cJSON_IsString(kind) ? kind->valuestring : "analytic only");
  cJSON_AddItemToObject(o, "profile", profile_summary(c->gpu_profile, p));
  return o;
}

static char *num_text(const cJSON *o, const char *key, const char *fmt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? g_strdup_printf(fmt, v->valuedouble) : g_strdup("-");
}

static void print_cluster_row(const cJSON *s) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(s, "profile");
  char *nics = num_text(s, "nics_per_node", "%.0f"), *line = num_text(s, "nic_link_Gbps", "%.0f");
  char *nvl = num_text(s, "nvlink_GBps_per_direction", "%.0f"), *fp8 = num_text(p, "peak_fp8_tflops", "%.0f");
  printf("%-18s %5.0f %4.0f %6.0f %4.0f %4s %6s %6.1f %6s %6.0f  %-15s %7.0f %5s %6.1f  %s\n",
         cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring,
         cJSON_GetObjectItemCaseSensitive(s, "nodes")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(s, "gpus_per_node")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(s, "gpus")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(s, "nvlink_domain_gpus")->valuedouble, nics, line,
         cJSON_GetObjectItemCaseSensitive(s, "nic_GBps")->valuedouble, nvl,
         cJSON_GetObjectItemCaseSensitive(s, "nvlink_allreduce_busbw_GBps")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(p, "name")->valuestring,
         cJSON_GetObjectItemCaseSensitive(p, "peak_tflops")->valuedouble, fp8,
         cJSON_GetObjectItemCaseSensitive(p, "memory_GiB")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(s, "network")->valuestring);
  g_free(nics);
  g_free(line);
  g_free(nvl);
  g_free(fp8);
}

static void print_profile_row(const cJSON *s) {
  char *fp8 = num_text(s, "peak_fp8_tflops", "%.0f");
  GString *prec = g_string_new(NULL);
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(s, "precisions"))
    g_string_append_printf(prec, "%s%s", prec->len ? "," : "", e->valuestring);
  printf("%-28s %8.0f %8s %8.1f %8.0f %5.0f  %s\n", cJSON_GetObjectItemCaseSensitive(s, "name")->valuestring,
         cJSON_GetObjectItemCaseSensitive(s, "peak_tflops")->valuedouble, fp8,
         cJSON_GetObjectItemCaseSensitive(s, "memory_GiB")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(s, "hbm_GBps")->valuedouble,
         cJSON_GetObjectItemCaseSensitive(s, "sms")->valuedouble, prec->str);
  g_free(fp8);
  g_string_free(prec, TRUE);
}

/* Every built-in cluster (with its default profile) and every profile. */
static gboolean list_all(CliFormat fmt, GError **error) {
  GPtrArray *cn = shipped(CLUSTERS_DIR), *pn = shipped(PROFILES_DIR);
  cJSON *clusters = cJSON_CreateArray(), *profiles = cJSON_CreateArray();
  gboolean ok = TRUE;
  for (guint i = 0; ok && i < cn->len; i++) {
    TopoCluster *c = NULL;
    ModelProfile *p = NULL;
    ok = cli_load_machine(g_ptr_array_index(cn, i), NULL, &c, &p, error);
    if (ok)
      cJSON_AddItemToArray(clusters, cluster_summary(g_ptr_array_index(cn, i), c, p));
    topo_cluster_free(c);
    model_profile_free(p);
  }
  for (guint i = 0; ok && i < pn->len; i++) {
    ModelProfile *p = model_profile_load(g_ptr_array_index(pn, i), error);
    ok = p != NULL;
    if (ok)
      cJSON_AddItemToArray(profiles, profile_summary(g_ptr_array_index(pn, i), p));
    model_profile_free(p);
  }
  if (ok && fmt == CLI_JSON) {
    cJSON *all = cJSON_CreateObject();
    cJSON_AddItemToObject(all, "clusters", clusters);
    cJSON_AddItemToObject(all, "profiles", profiles);
    clusters = profiles = NULL;
    cli_print_json(all);
    cJSON_Delete(all);
  } else if (ok) {
    printf("%-18s %5s %4s %6s %4s %4s %6s %6s %6s %6s  %-15s %7s %5s %6s  %s\n", "cluster", "nodes", "gpn", "gpus",
           "nvld", "nics", "Gbit/s", "GB/s", "nvlink", "busbw", "profile", "TFLOP/s", "fp8", "GiB", "network");
    const cJSON *s;
    cJSON_ArrayForEach(s, clusters) print_cluster_row(s);
    printf("\n%-28s %8s %8s %8s %8s %5s  %s\n", "profile", "TFLOP/s", "fp8", "GiB", "HBM GB/s", "SMs", "precisions");
    cJSON_ArrayForEach(s, profiles) print_profile_row(s);
    printf("\ngpn: GPUs per node; nvld: GPUs per NVLink domain; nics: NICs per node, Gbit/s each (line rate) and\n"
           "GB/s each (what NCCL reaches); nvlink: GB/s per GPU per direction on the NVSwitch (- without one); busbw:\n"
           "NCCL ring all-reduce GB/s inside a domain; TFLOP/s: dense bf16/fp16 peak. nodes is an example size: run\n"
           "--gpus N uses N of them, --nodes N (or sweep --set cluster.nodes=N) changes it. 'ptdsim clusters NAME'\n"
           "shows every number of one with its source.\n");
  }
  cJSON_Delete(clusters);
  cJSON_Delete(profiles);
  g_ptr_array_free(cn, TRUE);
  g_ptr_array_free(pn, TRUE);
  return ok;
}

/* The provenance entry for `path` itself, or NULL. */
static const char *source_of(const cJSON *prov, const char *path) {
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(prov, path);
  return cJSON_IsString(s) ? s->valuestring : NULL;
}

/* Every value below `node` as "path = value", each followed by the source
 * its provenance gives for it (or for the object it is in); each entry used
 * is marked in `used`. */
static void print_values(const cJSON *node, const char *path, const cJSON *prov, GHashTable *used) {
  const char *src = *path ? source_of(prov, path) : NULL;
  if (src)
    g_hash_table_add(used, g_strdup(path));
  if (cJSON_IsObject(node)) {
    if (src)
      printf("%s\n    source: %s\n", path, src);
    for (const cJSON *c = node->child; c; c = c->next) {
      if (!*path && (!strcmp(c->string, "provenance") || !strcmp(c->string, "description")))
        continue;
      char *sub = *path ? g_strdup_printf("%s.%s", path, c->string) : g_strdup(c->string);
      print_values(c, sub, prov, used);
      g_free(sub);
    }
    return;
  }
  char *v = cJSON_PrintUnformatted(node);
  printf("%s = %s\n", path, v);
  cJSON_free(v);
  if (src)
    printf("    source: %s\n", src);
}

/* One cluster or profile, built in (by name) or a file (by path, as
 * --cluster FILE and --profile FILE take it: a cluster is a file with
 * "gpus_per_node"), with every value and its provenance. */
static gboolean show_one(const char *name, CliFormat fmt, GError **error) {
  gboolean is_path = ptd_is_path(name), is_cluster;
  char *path = NULL;
  if (is_path) {
    /* the file is read and checked by its loader below; here only which */
    if (!(path = ptd_data_resolve(CLUSTERS_DIR, name, "cluster", error)))
      return FALSE;
    cJSON *peek = ptd_json_load(path, error);
    if (!peek) {
      g_free(path);
      return FALSE;
    }
    is_cluster = cJSON_GetObjectItemCaseSensitive(peek, "gpus_per_node") != NULL;
    cJSON_Delete(peek);
  } else {
    is_cluster = is_shipped(CLUSTERS_DIR, name);
    if (!is_cluster && !is_shipped(PROFILES_DIR, name)) {
      g_set_error(error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID,
                  "no built-in cluster or profile named '%s' ('ptdsim clusters' lists them)", name);
      return FALSE;
    }
  }
  TopoCluster *c = NULL;
  ModelProfile *p = NULL;
  if (is_cluster ? !cli_load_machine(name, NULL, &c, &p, error) : !(p = model_profile_load(name, error))) {
    g_free(path);
    return FALSE;
  }
  if (!path)
    path = ptd_data_resolve(is_cluster ? CLUSTERS_DIR : PROFILES_DIR, name, is_cluster ? "cluster" : "profile", error);
  cJSON *file = path ? ptd_json_load(path, error) : NULL;
  gboolean ok = file != NULL;
  /* a file's name: its "name", else the file's own name */
  const cJSON *named = file ? cJSON_GetObjectItemCaseSensitive(file, "name") : NULL;
  char *base = is_path ? g_path_get_basename(path) : NULL;
  char *shown = !is_path ? g_strdup(name)
                : cJSON_IsString(named) ? g_strdup(named->valuestring)
                                        : g_strndup(base, g_str_has_suffix(base, ".json") ? strlen(base) - 5 : strlen(base));
  char *where = is_path ? g_strdup(path)
                        : g_strdup_printf("%s/%s.json", is_cluster ? CLUSTERS_DIR : PROFILES_DIR, name);
  if (ok) {
    cJSON *summary = is_cluster ? cluster_summary(shown, c, p) : profile_summary(shown, p);
    if (fmt == CLI_JSON) {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "kind", is_cluster ? "cluster" : "profile");
      cJSON_AddItemToObject(o, "summary", summary);
      cJSON_AddItemToObject(o, "file", file);
      file = NULL;
      cli_print_json(o);
      cJSON_Delete(o);
    } else {
      const cJSON *desc = cJSON_GetObjectItemCaseSensitive(file, "description");
      const cJSON *prov = cJSON_GetObjectItemCaseSensitive(file, "provenance");
      printf("%s %s: %s\nfile: %s\n\n", is_cluster ? "cluster" : "profile", shown,
             cJSON_IsString(desc) ? desc->valuestring : "", where);
      GHashTable *used = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
      print_values(file, "", prov, used);
      gboolean header = FALSE;
      for (const cJSON *e = prov ? prov->child : NULL; e; e = e->next)
        if (cJSON_IsString(e) && !g_hash_table_contains(used, e->string)) {
          printf("%s%s: %s\n", header ? "" : "\nabout the whole:\n", e->string, e->valuestring);
          header = TRUE;
        }
      g_hash_table_destroy(used);
      cJSON_Delete(summary);
    }
  }
  cJSON_Delete(file);
  g_free(path);
  g_free(base);
  g_free(shown);
  g_free(where);
  topo_cluster_free(c);
  model_profile_free(p);
  return ok;
}

int cli_clusters(int argc, char **argv) {
  char *format = NULL;
  GOptionEntry entries[] = {{"format", 0, 0, G_OPTION_ARG_STRING, &format, "text (default) or json", "FORMAT"},
                            {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "[NAME|FILE] - the built-in clusters and device profiles (--cluster and --profile of run, "
                       "plan, sweep); with a NAME, or a cluster or profile file's path (with a '/' or ending in "
                       ".json), every number of that one and its source");
  cli_args_add(&args, entries);
  GError *error = NULL;
  CliFormat fmt = CLI_TEXT;
  int code = 0;
  if (!cli_args_parse(&args, &argc, &argv, &error) || !cli_format(format, &fmt, &error))
    goto fail;
  if (argc > 2) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "clusters takes at most one name, but got '%s'",
                argv[2]);
    goto fail;
  }
  if (!(argc == 2 ? show_one(argv[1], fmt, &error) : list_all(fmt, &error)))
    goto fail;
  goto done;
fail:
  code = cli_fail(error);
done:
  g_free(format);
  cli_args_clear(&args);
  return code;
}
