/* ptdsim — the ground floor: numbers for people (base/units.h). */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/heap.h"
#include "../base/jsonutil.h"
#include "../base/outfile.h"
#include "../base/ranges.h"
#include "../base/units.h"
#include "test_tmp.h"

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

/* --- reading inputs --- */

static char *tmpdir;

static char *tmp_file(const char *name, const char *text) {
  char *path = g_build_filename(tmpdir, name, NULL);
  if (text)
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
  return path;
}

/* Why: a JSON input accepted trailing junk, a NUL byte (the rest unread)
 * and a key twice (the first won); each is refused with the file's name,
 * and a repeated key is named by its path. */
static void test_json_strict(void) {
  static const struct {
    const char *text, *needle;
  } bad[] = {{"{\"a\": 1} junk", "malformed JSON"},
             {"{\"a\": 1}{\"b\": 2}", "malformed JSON"},
             {"[1, 2]", "top level must be a JSON object"},
             {"{\"a\": {\"b\": 1, \"b\": 2}}", "'a.b' is given twice"},
             {"{\"a\": [{\"c\": 1}, {\"c\": 2, \"c\": 3}]}", "'a[1].c' is given twice"},
             {"{\"a\": 1, \"a\": 1}", "'a' is given twice"}};
  for (guint i = 0; i < G_N_ELEMENTS(bad); i++) {
    GError *error = NULL;
    char *path = tmp_file("bad.json", bad[i].text);
    g_assert_null(ptd_json_load(path, &error));
    g_assert_nonnull(error);
    g_test_message("%s", error->message);
    g_assert_nonnull(strstr(error->message, path));
    g_assert_nonnull(strstr(error->message, bad[i].needle));
    g_clear_error(&error);
    g_free(path);
  }
  GError *error = NULL;
  g_assert_null(ptd_json_parse("{}\0{}", 5, "x", &error));
  g_assert_nonnull(strstr(error->message, "NUL byte"));
  g_clear_error(&error);
  char *path = tmp_file("good.json", "{\"a\": {\"b\": 1}, \"c\": [{\"b\": 2}, {\"b\": 3}]}\n\n");
  cJSON *root = ptd_json_load(path, &error);
  g_assert_no_error(error);
  g_assert_nonnull(root);
  cJSON_Delete(root);
  g_free(path);
}

/* Why: a FIFO blocked the reader forever and /dev/zero ate memory: only a
 * regular file of bounded size is read, and nothing waits on a pipe. */
static void test_read_input_bounds(void) {
  char *fifo = g_build_filename(tmpdir, "fifo", NULL);
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  const char *paths[] = {fifo, "/dev/zero", tmpdir};
  for (guint i = 0; i < G_N_ELEMENTS(paths); i++) {
    GError *error = NULL;
    gsize len;
    g_assert_null(ptd_read_input(paths[i], 100, &len, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "regular file"));
    g_clear_error(&error);
  }
  char *path = tmp_file("ten", "0123456789");
  GError *error = NULL;
  gsize len = 0;
  char *text = ptd_read_input(path, 10, &len, &error); /* exactly at the limit */
  g_assert_no_error(error);
  g_assert_cmpuint(len, ==, 10);
  g_assert_cmpstr(text, ==, "0123456789");
  g_free(text);
  g_assert_null(ptd_read_input(path, 9, &len, &error));
  g_assert_nonnull(strstr(error->message, "more than the 9"));
  g_clear_error(&error);
  g_unlink(fifo);
  g_free(fifo);
  g_free(path);
}

/* Why: a file in the working directory named like a built-in replaced it.
 * A name resolves to the shipped file only; a path to the file only. */
static void test_name_or_path(void) {
  g_assert_false(ptd_is_path("selene"));
  g_assert_true(ptd_is_path("./selene"));
  g_assert_true(ptd_is_path("selene.json"));
  g_assert_true(ptd_is_path("a/b"));
  char *cwd = g_get_current_dir();
  g_assert_cmpint(g_chdir(tmpdir), ==, 0);
  g_assert_true(g_file_set_contents("selene", "{}", -1, NULL));
  GError *error = NULL;
  char *path = ptd_data_resolve("topologies", "selene", "cluster", &error);
  g_assert_no_error(error);
  char *shipped = g_build_filename(ptd_data_dir(), "topologies", "selene.json", NULL);
  g_assert_cmpstr(path, ==, shipped);
  g_free(path);
  path = ptd_data_resolve("topologies", "./selene", "cluster", &error);
  g_assert_cmpstr(path, ==, "./selene");
  g_free(path);
  g_assert_true(g_file_set_contents("mine", "{}", -1, NULL));
  g_assert_null(ptd_data_resolve("topologies", "mine", "cluster", &error));
  g_assert_nonnull(strstr(error->message, "e.g. ./mine"));
  g_clear_error(&error);
  g_assert_null(ptd_data_resolve("topologies", "nosuch.json", "cluster", &error));
  g_assert_nonnull(strstr(error->message, "nosuch.json"));
  g_clear_error(&error);
  g_unlink("selene");
  g_unlink("mine");
  g_assert_cmpint(g_chdir(cwd), ==, 0);
  g_free(cwd);
  g_free(shipped);
}

/* Why: the error must say the range it checks, both ends included or not. */
static void test_ranges(void) {
  const PtdRange r = {0, 1, TRUE, FALSE, "share"};
  GError *error = NULL;
  g_assert_true(ptd_range_check(1, &r, "f", "k", &error));
  g_assert_true(ptd_range_check(1e-300, &r, "f", "k", &error));
  g_assert_false(ptd_range_check(0, &r, "f", "k", &error));
  g_assert_cmpstr(error->message, ==, "f: key 'k' is 0, outside (0, 1] share; give a value in that range");
  g_clear_error(&error);
  g_assert_false(ptd_range_check(NAN, &ptd_range_efficiency, "f", "k", &error));
  g_clear_error(&error);
  g_assert_false(ptd_range_check(INFINITY, &ptd_range_bandwidth_GBps, "f", "k", &error));
  g_clear_error(&error);
  cJSON *o = cJSON_Parse("{\"a\": {\"b\": 2.5, \"n\": 3}}");
  double v = 0;
  g_assert_true(ptd_json_in(o, "a.b", "f", &ptd_range_bandwidth_GBps, &v, &error));
  g_assert_cmpfloat(v, ==, 2.5);
  g_assert_false(ptd_json_in(o, "a.b", "f", &ptd_range_sms, &v, &error)); /* whole numbers only */
  g_assert_nonnull(strstr(error->message, "'a.b' must be a whole number"));
  g_clear_error(&error);
  g_assert_false(ptd_json_in(o, "a.c", "f", &ptd_range_sms, &v, &error));
  g_assert_nonnull(strstr(error->message, "'a.c' is missing"));
  g_clear_error(&error);
  g_assert_true(ptd_json_in_or(o, "a.c", "f", &ptd_range_sms, 7, &v, &error));
  g_assert_cmpfloat(v, ==, 7);
  cJSON_Delete(o);
}

/* --- writing outputs --- */

static mode_t mode_of(const char *path) {
  GStatBuf st;
  g_assert_cmpint(g_lstat(path, &st), ==, 0);
  return st.st_mode;
}

static guint entries(void) {
  GDir *d = g_dir_open(tmpdir, 0, NULL);
  guint n = 0;
  while (g_dir_read_name(d))
    n++;
  g_dir_close(d);
  return n;
}

/* Why: outputs replaced pipes, devices and symbolic links, overwrote the
 * run's own input, changed an existing file's mode, and left temporary
 * files behind on failure.  The helper refuses the first three, keeps the
 * mode, and an aborted write leaves the folder as it was. */
static void test_out_file(void) {
  guint before = entries();
  char *fifo = g_build_filename(tmpdir, "out-fifo", NULL), *link = g_build_filename(tmpdir, "out-link", NULL);
  char *target = tmp_file("target", "keep"), *out = tmp_file("out", "old");
  g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
  g_assert_cmpint(symlink(target, link), ==, 0);
  const struct {
    const char *path, *needle;
  } refused[] = {{fifo, "a pipe"}, {link, "a symbolic link"}, {tmpdir, "a directory"}, {"/dev/null", "device"}};
  GError *error = NULL;
  for (guint i = 0; i < G_N_ELEMENTS(refused); i++) {
    g_assert_false(ptd_write_file(refused[i].path, "-o", NULL, "x", 1, &error));
    g_assert_nonnull(strstr(error->message, refused[i].needle));
    g_clear_error(&error);
  }
  const char *inputs[] = {"/nonexistent", target, NULL};
  g_assert_false(ptd_write_file(target, "-o", inputs, "x", 1, &error));
  g_assert_nonnull(strstr(error->message, "is also an input"));
  g_clear_error(&error);
  gsize len;
  char *text = NULL;
  g_assert_true(g_file_get_contents(target, &text, &len, NULL));
  g_assert_cmpstr(text, ==, "keep");
  g_free(text);
  /* the mode of an existing file stays */
  g_assert_cmpint(g_chmod(out, 0640), ==, 0);
  g_assert_true(ptd_write_file(out, "-o", inputs, "new", 3, &error));
  g_assert_no_error(error);
  g_assert_cmpint(mode_of(out) & 0777, ==, 0640);
  g_assert_true(g_file_get_contents(out, &text, &len, NULL));
  g_assert_cmpstr(text, ==, "new");
  g_free(text);
  /* an aborted write leaves nothing, and the old file as it was */
  PtdOutFile *f = ptd_out_open(out, "-o", NULL, &error);
  g_assert_nonnull(f);
  g_assert_true(ptd_out_write(f, "partial", 7, &error));
  g_assert_true(g_file_test(ptd_out_tmp_path(f), G_FILE_TEST_IS_REGULAR));
  ptd_out_abort(f);
  g_assert_true(g_file_get_contents(out, &text, &len, NULL));
  g_assert_cmpstr(text, ==, "new");
  g_free(text);
  g_assert_cmpuint(entries(), ==, before + 4); /* fifo, link, target, out: no temporary file */
  g_unlink(fifo);
  g_unlink(link);
  g_unlink(target);
  g_unlink(out);
  g_free(fifo);
  g_free(link);
  g_free(target);
  g_free(out);
}

typedef struct {
  double key;
  guint id;
} Item;

static inline gboolean item_before(const Item *a, const Item *b) {
  return a->key < b->key || (a->key == b->key && a->id < b->id);
}
PTD_HEAP_DEFINE(item, Item, item_before)

static int item_cmp(const void *a, const void *b) {
  return item_before(a, b) ? -1 : item_before(b, a) ? 1 : 0;
}

/* Why: the engine's events and the flow solver's links come out of this
 * heap, and a run's outputs depend on the order they come out in: under a
 * strict order it must always pop the least.  Random pushes and pops,
 * few distinct keys (ties broken by the id), each pop checked against the
 * least of what is in (kept apart, sorted). */
static void test_heap_order(void) {
  GRand *r = g_rand_new_with_seed(43);
  Item heap[600], in[600];
  guint n = 0, n_in = 0, next_id = 0;
  for (guint step = 0; step < 20000; step++) {
    gboolean push = n == 0 || (n < G_N_ELEMENTS(heap) && g_rand_int_range(r, 0, 100) < 55);
    if (push) {
      Item x = {g_rand_int_range(r, 0, 8), next_id++};
      item_push_at(heap, &n, x);
      in[n_in++] = x;
      continue;
    }
    qsort(in, n_in, sizeof(Item), item_cmp);
    Item top = item_pop_at(heap, &n);
    g_assert_cmpfloat(top.key, ==, in[0].key);
    g_assert_cmpuint(top.id, ==, in[0].id);
    memmove(in, in + 1, --n_in * sizeof(Item));
    g_assert_cmpuint(n, ==, n_in);
  }
  g_rand_free(r);
}

int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  tmpdir = test_tmp_dir("ptdsim-base");
  g_test_add_func("/base/format-si", test_format_si);
  g_test_add_func("/base/format-count", test_format_count);
  g_test_add_func("/base/parse-count", test_parse_count);
  g_test_add_func("/base/json-strict", test_json_strict);
  g_test_add_func("/base/read-input-bounds", test_read_input_bounds);
  g_test_add_func("/base/name-or-path", test_name_or_path);
  g_test_add_func("/base/ranges", test_ranges);
  g_test_add_func("/base/out-file", test_out_file);
  g_test_add_func("/base/heap-order", test_heap_order);
  int rc = g_test_run();
  test_rm_rf(tmpdir);
  g_free(tmpdir);
  return rc;
}
