/* placeholder, being written */
#include <glib.h>
static void t_placeholder(void) { g_assert_cmpint(1 + 1, ==, 2); }
int main(int argc, char **argv) {
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/cli/placeholder", t_placeholder);
  return g_test_run();
}
