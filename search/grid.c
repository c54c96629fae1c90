/* ptdsim — a grid of configurations (see grid.h). */
#include "grid.h"

#include <math.h>
#include <string.h>

#include "../base/jsonutil.h"
#include "../base/units.h"
#include "../topologies/fabric.h"

G_DEFINE_QUARK(search-grid-error-quark, search_grid_error)

/* Values one option or set key may take in a sweep. */
#define MAX_VALUES 1000000u
/* Distinct machines (cluster, profile and set values) in one sweep. */
#define MAX_MACHINES 4096u

/* One column of the grid: an option or a set key, and its values. */
typedef struct {
  gboolean is_set;
  SearchOptId id; /* an option */
  char *key;      /* the column's name: the option's, or the set key ("cluster.network.nic_GBps") */
  gboolean on_cluster; /* a set key: of the cluster (else of the profile) */
  char *path;          /* a set key: the dotted path in the file */
  GPtrArray *values;   /* char*, as text */
  guint axis;          /* the axis it varies on */
  guint order;         /* its place among the members given */
} Member;

/* One axis: members that vary together (one, or a zip group). */
typedef struct {
  GPtrArray *members; /* Member*, not owned */
  guint n;            /* values */
  gboolean machine;   /* a member changes the machine */
} Axis;

typedef struct {
  TopoCluster *cluster;
  ModelProfile *profile;
} Machine;

struct _SearchGrid {
  GPtrArray *members;  /* Member*, owned, in the order given */
  GPtrArray *zips;     /* GStrv: groups of column names */
  GPtrArray *axes;     /* Axis*, owned (prepare) */
  GPtrArray *columns;  /* Member*: options in table order, then set keys in the order given (prepare) */
  GPtrArray *machines; /* Machine*, owned (prepare), by machine index */
  guint64 points;
  gboolean step_effects; /* rows price the step's effects (sweep --step-effects) */
};

void search_grid_set_step_effects(SearchGrid *g, gboolean on) { g->step_effects = on; }
gboolean search_grid_step_effects(const SearchGrid *g) { return g->step_effects; }

static gboolean spec_error(GError **error, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
static gboolean spec_error(GError **error, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  g_set_error_literal(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC, msg);
  g_free(msg);
  return FALSE;
}

static void member_free(gpointer p) {
  Member *m = p;
  g_free(m->key);
  g_free(m->path);
  g_ptr_array_unref(m->values);
  g_free(m);
}

/* Adds a parsed member to the grid, or frees it when parsing failed. */
static gboolean keep_member(SearchGrid *g, Member *m, gboolean ok) {
  if (!ok) {
    member_free(m);
    return FALSE;
  }
  m->order = g->members->len;
  g_ptr_array_add(g->members, m);
  return TRUE;
}

static void axis_free(gpointer p) {
  Axis *a = p;
  g_ptr_array_unref(a->members);
  g_free(a);
}

static void machine_free(gpointer p) {
  Machine *m = p;
  if (!m) /* a machine not loaded (an error before it) */
    return;
  topo_cluster_free(m->cluster);
  model_profile_free(m->profile);
  g_free(m);
}

SearchGrid *search_grid_new(void) {
  SearchGrid *g = g_new0(SearchGrid, 1);
  g->members = g_ptr_array_new_with_free_func(member_free);
  g->zips = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
  g->axes = g_ptr_array_new_with_free_func(axis_free);
  g->columns = g_ptr_array_new();
  g->machines = g_ptr_array_new_with_free_func(machine_free);
  return g;
}

void search_grid_free(SearchGrid *g) {
  if (!g)
    return;
  g_ptr_array_unref(g->machines);
  g_ptr_array_unref(g->columns);
  g_ptr_array_unref(g->axes);
  g_ptr_array_unref(g->zips);
  g_ptr_array_unref(g->members);
  g_free(g);
}

static Member *find(const SearchGrid *g, const char *key) {
  for (guint i = 0; i < g->members->len; i++) {
    Member *m = g_ptr_array_index(g->members, i);
    if (strcmp(m->key, key) == 0)
      return m;
  }
  return NULL;
}

/* --- values --- */

/* A whole number from 1 to 2^31-1 in decimal digits. */
static gboolean parse_count(const char *s, guint64 *out) {
  return ptd_parse_whole(s, G_MAXINT32, out) && *out >= 1;
}

/* A finite number of zero or more, in decimal (ptd_parse_real). */
static gboolean parse_number(const char *s, double *out) {
  return ptd_parse_real(s, out) && *out >= 0;
}

static void add_number(GPtrArray *values, double v) {
  GString *s = g_string_new(NULL);
  ptd_append_exact_number(s, v);
  g_ptr_array_add(values, g_string_free(s, FALSE));
}

/* A range A..B (step 1), A..BxK (times K) or A..B+K (plus K), of counts or
 * of numbers. */
static gboolean parse_range(const char *what, const char *item, gboolean counts, GPtrArray *values, GError **error) {
  const char *dots = strstr(item, "..");
  char *lo_text = g_strndup(item, (gsize)(dots - item));
  const char *rest = dots + 2;
  const char *op = strpbrk(rest, "x+");
  char *hi_text = op ? g_strndup(rest, (gsize)(op - rest)) : g_strdup(rest);
  char *step_text = op ? g_strdup(op + 1) : g_strdup("1");
  gboolean times = op && *op == 'x';
  double lo = 0, hi = 0, step = 0;
  guint64 ilo, ihi, istep;
  gboolean ok = counts ? parse_count(lo_text, &ilo) && parse_count(hi_text, &ihi) && parse_count(step_text, &istep)
                       : parse_number(lo_text, &lo) && parse_number(hi_text, &hi) && parse_number(step_text, &step);
  if (ok && counts)
    lo = (double)ilo, hi = (double)ihi, step = (double)istep;
  if (!ok)
    spec_error(error, "%s '%s' is not a range; write A..B, A..BxK (times K) or A..B+K (plus K) with %s", what, item,
               counts ? "whole numbers from 1" : "numbers of zero or more");
  else if (lo > hi)
    ok = spec_error(error, "%s '%s' is an empty range (%s above %s); give the smaller value first", what, item,
                    lo_text, hi_text);
  else if (times ? step <= 1 || lo <= 0 : step <= 0)
    ok = spec_error(error, "%s '%s': the step must be %s", what, item,
                    times ? "above 1 (and the range start above 0) for xK" : "above 0 for +K");
  for (double v = lo; ok && v <= hi * (1 + 1e-12); v = times ? v * step : v + step) {
    if (values->len >= MAX_VALUES) {
      ok = spec_error(error, "%s '%s' has more than %u values; narrow it", what, item, MAX_VALUES);
      break;
    }
    if (counts) {
      char buf[16];
      g_snprintf(buf, sizeof buf, "%.0f", v);
      g_ptr_array_add(values, g_strdup(buf));
    } else
      add_number(values, v);
  }
  g_free(lo_text);
  g_free(hi_text);
  g_free(step_text);
  return ok;
}

/* The values of a spec: comma-separated items, each a value, a range or
 * (words) "all".  `counts`/`numbers` choose what an item must be; `choices`
 * lists a closed set of words. */
typedef enum { VALUES_COUNTS, VALUES_NUMBERS, VALUES_WORDS, VALUES_BOOLS } ValueKind;

static gboolean parse_values(const char *what, const char *spec, ValueKind kind, const char *const *choices,
                             const char *sep, GPtrArray *values, GError **error) {
  if (!spec || !*spec)
    return spec_error(error, "%s has no value; give one, a list (a%sb%sc) or a range (A..B)", what, sep, sep);
  char **items = g_strsplit(spec, sep, -1);
  gboolean ok = TRUE;
  for (guint i = 0; ok && items[i]; i++) {
    const char *item = items[i];
    guint64 c;
    double d;
    if (!*item)
      ok = spec_error(error, "%s '%s' has an empty item; remove the extra '%s'", what, spec, sep);
    else if ((kind == VALUES_COUNTS || kind == VALUES_NUMBERS) && strstr(item, ".."))
      ok = parse_range(what, item, kind == VALUES_COUNTS, values, error);
    else if (kind == VALUES_COUNTS && !parse_count(item, &c))
      ok = spec_error(error, "%s '%s' is not a whole number from 1 to %d; give decimal digits", what, item, G_MAXINT32);
    else if (kind == VALUES_NUMBERS && !parse_number(item, &d))
      ok = spec_error(error, "%s '%s' is not a number of zero or more", what, item);
    else if (kind == VALUES_BOOLS && strcmp(item, "true") != 0 && strcmp(item, "false") != 0)
      ok = spec_error(error, "%s '%s' is not true or false", what, item);
    else if (kind == VALUES_WORDS && strcmp(item, "all") == 0 && choices)
      for (const char *const *w = choices; *w; w++)
        g_ptr_array_add(values, g_strdup(*w));
    else if (kind == VALUES_WORDS && strcmp(item, "all") == 0)
      ok = spec_error(error, "%s has no named set 'all'; list its values", what);
    else if (kind == VALUES_NUMBERS)
      add_number(values, d);
    else
      g_ptr_array_add(values, g_strdup(item));
    if (ok && values->len > MAX_VALUES)
      ok = spec_error(error, "%s has more than %u values; narrow it", what, MAX_VALUES);
  }
  g_strfreev(items);
  return ok;
}

gboolean search_grid_add_option(SearchGrid *g, SearchOptId id, const char *spec, GError **error) {
  if (id == SEARCH_OPT_NODES) { /* the cluster's size: a number of its file, as --set cluster.nodes=N */
    char *set = g_strconcat("cluster.nodes=", spec, NULL);
    gboolean ok = search_grid_add_set(g, set, error);
    g_free(set);
    return ok;
  }
  const SearchOption *o = search_option(id);
  char *what = g_strdup_printf("--%s", o->name);
  if (find(g, o->name)) {
    gboolean r = spec_error(error, "%s is given twice (on the command line and in the sweep file?); give it once",
                            what);
    g_free(what);
    return r;
  }
  Member *m = g_new0(Member, 1);
  m->id = id;
  m->key = g_strdup(o->name);
  m->values = g_ptr_array_new_with_free_func(g_free);
  ValueKind kind = o->kind == SEARCH_OPT_COUNT ? VALUES_COUNTS : o->kind == SEARCH_OPT_FLAG ? VALUES_BOOLS : VALUES_WORDS;
  /* the closed set's words (the model's names, or the option's) */
  const char **own = NULL;
  if (o->words) {
    guint n = 0;
    while (o->words[n].word)
      n++;
    own = g_new0(const char *, n + 1);
    for (guint i = 0; i < n; i++)
      own[i] = o->words[i].word;
  }
  const char *const *choices = id == SEARCH_OPT_MODEL ? model_names() : own;
  /* --slices (512,384,...) and --stage-times (F,B,W,COMM) take lists of
   * their own: their values are separated by ';' */
  const char *sep = id == SEARCH_OPT_SLICES || id == SEARCH_OPT_STAGE_TIMES || id == SEARCH_OPT_PIPELINE_LAYOUT ? ";" : ",";
  gboolean ok = parse_values(what, o->kind == SEARCH_OPT_FLAG && !spec ? "true" : spec, kind, choices, sep,
                             m->values, error);
  /* every word of a closed set must be one of it */
  for (guint i = 0; ok && choices && i < m->values->len; i++) {
    const char *v = g_ptr_array_index(m->values, i);
    gboolean known = id == SEARCH_OPT_MODEL && ptd_is_path(v); /* a model file (search_value_check reads it) */
    for (const char *const *w = choices; *w && !known; w++)
      known = strcmp(*w, v) == 0;
    if (!known) {
      GString *list = g_string_new(NULL);
      for (const char *const *w = choices; *w; w++)
        g_string_append_printf(list, "%s%s", list->len ? ", " : "", *w);
      ok = spec_error(error, "%s '%s' is not one of %s (or all)", what, v, list->str);
      g_string_free(list, TRUE);
    }
  }
  g_free(own);
  /* a value wrong on its own (--tokens NaN) is wrong for every row */
  for (guint i = 0; ok && i < m->values->len; i++)
    ok = search_value_check(id, g_ptr_array_index(m->values, i), error);
  g_free(what);
  return keep_member(g, m, ok);
}

gboolean search_grid_add_set(SearchGrid *g, const char *key_values, GError **error) {
  const char *eq = strchr(key_values, '=');
  if (!eq || eq == key_values)
    return spec_error(error, "--set '%s' is not KEY=VALUES; e.g. --set cluster.network.nic_GBps=24,48", key_values);
  char *key = g_strndup(key_values, (gsize)(eq - key_values));
  gboolean on_cluster = g_str_has_prefix(key, "cluster."), on_profile = g_str_has_prefix(key, "profile.");
  gboolean ok = TRUE;
  if (!on_cluster && !on_profile)
    ok = spec_error(error, "--set key '%s' names neither the cluster nor the profile; begin it with cluster. or "
                           "profile. (e.g. cluster.network.nic_GBps, profile.peak_tflops)",
                    key);
  else if (find(g, key))
    ok = spec_error(error, "--set %s is given twice; give each key once", key);
  if (!ok) {
    g_free(key);
    return FALSE;
  }
  Member *m = g_new0(Member, 1);
  m->is_set = TRUE;
  m->key = key;
  m->on_cluster = on_cluster;
  m->path = g_strdup(key + (on_cluster ? strlen("cluster.") : strlen("profile.")));
  m->values = g_ptr_array_new_with_free_func(g_free);
  char *what = g_strdup_printf("--set %s", key);
  if (!*m->path)
    ok = spec_error(error, "--set '%s' has no path after the dot", key_values);
  else
    ok = parse_values(what, eq + 1, VALUES_NUMBERS, NULL, ",", m->values, error);
  g_free(what);
  return keep_member(g, m, ok);
}

gboolean search_grid_add_zip(SearchGrid *g, const char *names, GError **error) {
  char **list = g_strsplit(names, ",", -1);
  guint n = g_strv_length(list);
  if (n < 2) {
    g_strfreev(list);
    return spec_error(error, "--zip '%s' names one column; zip two or more, e.g. --zip tp,pp", names);
  }
  for (guint i = 0; i < n; i++)
    for (guint j = 0; j < i; j++)
      if (strcmp(list[i], list[j]) == 0) {
        gboolean r = spec_error(error, "--zip '%s' names %s twice", names, list[i]);
        g_strfreev(list);
        return r;
      }
  g_ptr_array_add(g->zips, list);
  return TRUE;
}

/* --- sweep files --- */

/* A JSON value of a sweep file as the spec text of a command line. */
static char *spec_of(const cJSON *v) {
  if (cJSON_IsString(v))
    return g_strdup(v->valuestring);
  if (cJSON_IsBool(v))
    return g_strdup(cJSON_IsTrue(v) ? "true" : "false");
  if (cJSON_IsNumber(v)) {
    GString *s = g_string_new(NULL);
    ptd_append_exact_number(s, v->valuedouble); /* a negative one is refused by the parser, by name */
    return g_string_free(s, FALSE);
  }
  if (cJSON_IsArray(v)) {
    GString *s = g_string_new(NULL);
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
      char *one = cJSON_IsArray(x) || cJSON_IsObject(x) ? g_strdup("") : spec_of(x);
      g_string_append_printf(s, "%s%s", s->len || x != v->child ? "," : "", one);
      g_free(one);
    }
    return g_string_free(s, FALSE);
  }
  return g_strdup("");
}

gboolean search_grid_add_file(SearchGrid *g, const char *path, GError **error) {
  cJSON *root = ptd_json_load(path, error);
  if (!root)
    return FALSE;
  gboolean ok = TRUE;
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    if (strcmp(item->string, "options") != 0 && strcmp(item->string, "set") != 0 && strcmp(item->string, "zip") != 0)
      ok = spec_error(error, "%s: unknown key '%s'; a sweep file holds \"options\", \"set\" and \"zip\"", path,
                      item->string);
    if (!ok)
      break;
  }
  const cJSON *opts = cJSON_GetObjectItemCaseSensitive(root, "options");
  if (ok && opts && !cJSON_IsObject(opts))
    ok = spec_error(error, "%s: \"options\" must be an object of option names and values", path);
  cJSON_ArrayForEach(item, opts) {
    if (!ok)
      break;
    gint id = search_option_find(item->string);
    if (id < 0) {
      ok = spec_error(error, "%s: \"options\" has no option '%s' (ptdsim run --help lists them, without the dashes)",
                      path, item->string);
      break;
    }
    char *spec = spec_of(item);
    GError *local = NULL;
    ok = search_grid_add_option(g, (SearchOptId)id, spec, &local);
    if (!ok)
      spec_error(error, "%s: %s", path, local->message), g_clear_error(&local);
    g_free(spec);
  }
  const cJSON *sets = cJSON_GetObjectItemCaseSensitive(root, "set");
  if (ok && sets && !cJSON_IsObject(sets))
    ok = spec_error(error, "%s: \"set\" must be an object of keys and values", path);
  cJSON_ArrayForEach(item, sets) {
    if (!ok)
      break;
    char *spec = spec_of(item), *kv = g_strdup_printf("%s=%s", item->string, spec);
    GError *local = NULL;
    ok = search_grid_add_set(g, kv, &local);
    if (!ok)
      spec_error(error, "%s: %s", path, local->message), g_clear_error(&local);
    g_free(spec);
    g_free(kv);
  }
  const cJSON *zips = cJSON_GetObjectItemCaseSensitive(root, "zip");
  if (ok && zips && !cJSON_IsArray(zips))
    ok = spec_error(error, "%s: \"zip\" must be a list of lists of names, e.g. [[\"tp\", \"pp\"]]", path);
  cJSON_ArrayForEach(item, zips) {
    if (!ok)
      break;
    GString *names = g_string_new(NULL);
    const cJSON *name;
    cJSON_ArrayForEach(name, item) {
      if (!cJSON_IsString(name))
        ok = FALSE;
      else
        g_string_append_printf(names, "%s%s", names->len ? "," : "", name->valuestring);
    }
    if (!cJSON_IsArray(item) || !ok)
      ok = spec_error(error, "%s: \"zip\" must be a list of lists of names, e.g. [[\"tp\", \"pp\"]]", path);
    else {
      GError *local = NULL;
      ok = search_grid_add_zip(g, names->str, &local);
      if (!ok)
        spec_error(error, "%s: %s", path, local->message), g_clear_error(&local);
    }
    g_string_free(names, TRUE);
  }
  cJSON_Delete(root);
  return ok;
}

/* --- preparing --- */

/* The number at a dotted path of a JSON object (NULL if there is none). */
static cJSON *number_at(cJSON *root, const char *path) {
  char **parts = g_strsplit(path, ".", -1);
  cJSON *o = root;
  for (guint i = 0; parts[i] && o; i++)
    o = cJSON_GetObjectItemCaseSensitive(o, parts[i]);
  g_strfreev(parts);
  return cJSON_IsNumber(o) ? o : NULL;
}

/* Point k's value index on axis a. */
static guint value_on(const SearchGrid *g, guint64 k, guint a) {
  for (guint b = g->axes->len; b-- > a + 1;)
    k /= ((Axis *)g_ptr_array_index(g->axes, b))->n;
  return (guint)(k % ((Axis *)g_ptr_array_index(g->axes, a))->n);
}

/* The machine of point k: its index among the machine axes' combinations. */
static guint machine_of(const SearchGrid *g, guint64 k) {
  guint index = 0;
  for (guint a = 0; a < g->axes->len; a++) {
    const Axis *ax = g_ptr_array_index(g->axes, a);
    if (ax->machine)
      index = index * ax->n + value_on(g, k, a);
  }
  return index;
}

static const char *member_value(const SearchGrid *g, const Member *m, guint64 k) {
  return g_ptr_array_index(m->values, value_on(g, k, m->axis));
}

gboolean search_grid_machine_json(const SearchGrid *g, guint64 k, cJSON **cluster, char **cluster_path,
                                  cJSON **profile, char **profile_path, GError **error) {
  const Member *cm = find(g, "cluster"), *pm = find(g, "profile");
  const char *cluster_name = cm ? member_value(g, cm, k) : "selene";
  char *cpath = ptd_data_resolve("topologies", cluster_name, "cluster", error);
  cJSON *croot = cpath ? ptd_json_load(cpath, error) : NULL;
  gboolean ok = croot != NULL;
  cJSON *proot = NULL;
  char *ppath = NULL;
  /* the cluster's numbers first: its default profile is a word */
  for (guint i = 0; ok && i < g->members->len; i++) {
    const Member *m = g_ptr_array_index(g->members, i);
    if (!m->is_set || !m->on_cluster)
      continue;
    cJSON *n = number_at(croot, m->path);
    if (!n)
      ok = spec_error(error, "--set %s: %s has no number at '%s'; give the dotted path of a number in it", m->key,
                      cpath, m->path);
    else
      cJSON_SetNumberValue(n, g_ascii_strtod(member_value(g, m, k), NULL));
  }
  if (ok) {
    const cJSON *dflt = cJSON_GetObjectItemCaseSensitive(croot, "gpu_profile");
    const char *profile_name = pm ? member_value(g, pm, k) : cJSON_IsString(dflt) ? dflt->valuestring : NULL;
    if (!profile_name)
      ok = spec_error(error, "%s has no gpu_profile; give --profile", cpath);
    else if ((ppath = ptd_data_resolve("calibrate/profiles", profile_name, "profile", error)))
      proot = ptd_json_load(ppath, error);
    ok = proot != NULL;
  }
  for (guint i = 0; ok && i < g->members->len; i++) {
    const Member *m = g_ptr_array_index(g->members, i);
    if (!m->is_set || m->on_cluster)
      continue;
    cJSON *n = number_at(proot, m->path);
    if (!n)
      ok = spec_error(error, "--set %s: %s has no number at '%s'; give the dotted path of a number in it", m->key,
                      ppath, m->path);
    else
      cJSON_SetNumberValue(n, g_ascii_strtod(member_value(g, m, k), NULL));
  }
  if (!ok) {
    cJSON_Delete(croot);
    cJSON_Delete(proot);
    g_free(cpath);
    g_free(ppath);
    return FALSE;
  }
  *cluster = croot;
  *cluster_path = cpath;
  *profile = proot;
  *profile_path = ppath;
  return TRUE;
}

/* Loads the machine of point k (cluster and profile with the set values). */
static Machine *load_machine(const SearchGrid *g, guint64 k, GError **error) {
  cJSON *croot = NULL, *proot = NULL;
  char *cpath = NULL, *ppath = NULL;
  Machine *mach = NULL;
  gboolean ok = search_grid_machine_json(g, k, &croot, &cpath, &proot, &ppath, error);
  if (ok) {
    mach = g_new0(Machine, 1);
    GError *local = NULL;
    mach->cluster = topo_cluster_from_json(croot, cpath, &local);
    croot = NULL; /* taken */
    /* a set value in the fabric is checked by building the fabric once */
    for (guint i = 0; mach->cluster && i < g->members->len; i++) {
      const Member *m = g_ptr_array_index(g->members, i);
      if (!m->is_set || !m->on_cluster || !g_str_has_prefix(m->path, "fabric."))
        continue;
      const TopoCluster *c = mach->cluster;
      TopoFabric *f = topo_fabric_build(cJSON_GetObjectItemCaseSensitive(c->json, "fabric"), cpath, c->nodes,
                                        c->gpus_per_node, c->net.nics_per_node, &local);
      if (!f) {
        topo_cluster_free(mach->cluster);
        mach->cluster = NULL;
      }
      topo_fabric_free(f);
      break;
    }
    if (mach->cluster)
      mach->profile = model_profile_from_json(proot, ppath, &local);
    if (!mach->profile) {
      /* a set value the loader refuses (a negative efficiency, ...) */
      g_set_error(error, SEARCH_GRID_ERROR, SEARCH_GRID_ERROR_SPEC, "%s", local->message);
      g_error_free(local);
      machine_free(mach);
      mach = NULL;
    }
  }
  cJSON_Delete(croot);
  cJSON_Delete(proot);
  g_free(cpath);
  g_free(ppath);
  return mach;
}

static gint column_order(gconstpointer a, gconstpointer b) {
  const Member *x = *(Member *const *)a, *y = *(Member *const *)b;
  if (x->is_set != y->is_set)
    return x->is_set ? 1 : -1;
  return x->is_set ? (gint)x->order - (gint)y->order : (gint)x->id - (gint)y->id;
}

gboolean search_grid_prepare(SearchGrid *g, GError **error) {
  g_ptr_array_set_size(g->axes, 0);
  g_ptr_array_set_size(g->columns, 0);
  g_ptr_array_set_size(g->machines, 0);
  /* zip groups: every name in the grid, the same number of values */
  for (guint z = 0; z < g->zips->len; z++) {
    char **names = g_ptr_array_index(g->zips, z);
    for (guint i = 0; names[i]; i++) {
      const Member *m = find(g, names[i]);
      const Member *first = find(g, names[0]);
      if (!m)
        return spec_error(error, "--zip names %s, which is not in the sweep; give it a list of values too", names[i]);
      if (m->values->len != first->values->len)
        return spec_error(error, "--zip %s and %s have %u and %u values; zipped columns need as many each", names[0],
                          names[i], first->values->len, m->values->len);
      for (guint y = 0; y < z; y++)
        if (g_strv_contains((const char *const *)g_ptr_array_index(g->zips, y), names[i]))
          return spec_error(error, "%s is in two --zip groups; merge them into one", names[i]);
    }
  }
  /* axes, in the order given; a zip group at its first member's place */
  for (guint i = 0; i < g->members->len; i++) {
    Member *m = g_ptr_array_index(g->members, i);
    Axis *axis = NULL;
    for (guint z = 0; z < g->zips->len && !axis; z++) {
      char **names = g_ptr_array_index(g->zips, z);
      if (!g_strv_contains((const char *const *)names, m->key))
        continue;
      for (guint a = 0; a < g->axes->len && !axis; a++) {
        Axis *ax = g_ptr_array_index(g->axes, a);
        const Member *other = g_ptr_array_index(ax->members, 0);
        if (g_strv_contains((const char *const *)names, other->key))
          axis = ax;
      }
    }
    if (!axis) {
      axis = g_new0(Axis, 1);
      axis->members = g_ptr_array_new();
      axis->n = m->values->len;
      g_ptr_array_add(g->axes, axis);
    }
    m->axis = g->axes->len - 1;
    for (guint a = 0; a < g->axes->len; a++)
      if (g_ptr_array_index(g->axes, a) == axis)
        m->axis = a;
    g_ptr_array_add(axis->members, m);
    axis->machine |= m->is_set || (!m->is_set && (m->id == SEARCH_OPT_CLUSTER || m->id == SEARCH_OPT_PROFILE));
    g_ptr_array_add(g->columns, m);
  }
  g_ptr_array_sort(g->columns, column_order);
  g->points = 1;
  guint64 machines = 1;
  for (guint a = 0; a < g->axes->len; a++) {
    const Axis *ax = g_ptr_array_index(g->axes, a);
    g->points *= ax->n;
    if (ax->machine)
      machines *= ax->n;
    if (g->points > SEARCH_GRID_MAX_POINTS)
      return spec_error(error, "the sweep has more than %llu configurations; narrow its lists or ranges",
                        (unsigned long long)SEARCH_GRID_MAX_POINTS);
  }
  if (machines > MAX_MACHINES)
    return spec_error(error, "the sweep has %llu distinct machines (clusters, profiles and --set values); at most %u",
                      (unsigned long long)machines, MAX_MACHINES);
  /* load every machine: the first point that has it */
  for (guint i = 0; i < machines; i++)
    g_ptr_array_add(g->machines, NULL);
  for (guint64 k = 0, loaded = 0; k < g->points && loaded < machines; k++) {
    guint mi = machine_of(g, k);
    if (g_ptr_array_index(g->machines, mi))
      continue;
    Machine *m = load_machine(g, k, error);
    if (!m)
      return FALSE;
    g_ptr_array_index(g->machines, mi) = m;
    loaded++;
  }
  return TRUE;
}

guint64 search_grid_points(const SearchGrid *g) { return g->points; }
guint search_grid_n_columns(const SearchGrid *g) { return g->columns->len; }

const char *search_grid_column(const SearchGrid *g, guint c) {
  return ((const Member *)g_ptr_array_index(g->columns, c))->key;
}

const char *search_grid_value(const SearchGrid *g, guint64 k, guint c) {
  return member_value(g, g_ptr_array_index(g->columns, c), k);
}

gboolean search_grid_point(const SearchGrid *g, guint64 k, SearchConfig *cfg, const TopoCluster **cluster,
                           const ModelProfile **profile, GError **error) {
  search_config_init(cfg);
  for (guint i = 0; i < g->members->len; i++) {
    const Member *m = g_ptr_array_index(g->members, i);
    if (m->is_set)
      continue;
    const char *v = member_value(g, m, k);
    if (search_option(m->id)->kind == SEARCH_OPT_FLAG) {
      if (strcmp(v, "true") == 0)
        search_config_set(cfg, m->id, NULL, NULL);
    } else if (!search_config_set(cfg, m->id, v, error)) {
      search_config_clear(cfg);
      return FALSE;
    }
  }
  const Machine *mach = g_ptr_array_index(g->machines, machine_of(g, k));
  *cluster = mach->cluster;
  *profile = mach->profile;
  return TRUE;
}

/* The first 16 hex digits of a file's SHA-256, or "unreadable". */
static char *short_sha256(const char *path) {
  char *text = NULL;
  gsize len = 0;
  if (!path || !g_file_get_contents(path, &text, &len, NULL))
    return g_strdup("unreadable");
  char *sum = g_compute_checksum_for_data(G_CHECKSUM_SHA256, (const guchar *)text, len);
  g_free(text);
  sum[16] = '\0';
  return sum;
}

char *search_grid_inputs(const SearchGrid *g) {
  GString *s = g_string_new(NULL);
  GHashTable *seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint i = 0; i < g->machines->len; i++) {
    const Machine *m = g_ptr_array_index(g->machines, i);
    if (!m)
      continue;
    const char *kinds[2] = {"cluster", "profile"}, *paths[2] = {m->cluster->path, m->profile->path};
    for (guint j = 0; j < 2; j++) {
      char *base = g_path_get_basename(paths[j] ? paths[j] : "?"), *sum = short_sha256(paths[j]);
      char *entry = g_strdup_printf("%s %s sha256 %s", kinds[j], base, sum);
      if (g_hash_table_add(seen, entry))
        g_string_append_printf(s, "%s%s", s->len ? ", " : "", entry);
      g_free(base);
      g_free(sum);
    }
  }
  g_hash_table_destroy(seen);
  return g_string_free(s, FALSE);
}
