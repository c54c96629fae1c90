/* ptdsim — many configurations on every core, results in order.
 *
 * search_pool_run evaluates items 0 .. n-1 with `jobs` threads (a GLib
 * thread pool; 1: in the calling thread) and hands each result to `done`
 * in the calling thread in index order, as soon as every item before it is
 * done, whatever order the threads finish in: output built from `done` is
 * the same for any `jobs`.  At most a bounded window of items is in flight,
 * so memory stays flat however long the list.  `fn` must be safe to call
 * from several threads at once on different items. */
#pragma once

#include <glib.h>

/* Evaluates item `index`; returns its result (owned by `done`; not NULL). */
typedef gpointer (*SearchPoolFn)(guint index, gpointer user);
/* Takes the result of item `index`, in order; FALSE stops the run (items in
 * flight finish and are freed with `free_result`, none is started). */
typedef gboolean (*SearchPoolDone)(guint index, gpointer result, gpointer user);

typedef struct {
  guint n;      /* items */
  guint offset; /* item j has index offset + j * stride, handed to fn and done */
  guint stride; /* 0 means 1 */
  guint jobs;   /* threads; 0 or 1: the calling thread alone */
  SearchPoolFn fn;
  SearchPoolDone done;
  GDestroyNotify free_result; /* for results never handed to `done` (may be NULL) */
  gpointer user;
  /* Checked between items: once it reads non-zero no item is started; the
   * items already running finish and are still handed to `done` in order,
   * up to the first one that was not started. */
  const volatile gint *stop;
} SearchPool;

/* FALSE when `done` or `stop` ended the run early. */
gboolean search_pool_run(const SearchPool *pool);

/* The number of processors this process may run on (at least 1). */
guint search_pool_cores(void);
