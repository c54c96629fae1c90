/* ptdsim — a thread pool with results in order (see pool.h). */
#include "pool.h"

/* Items in flight per thread: enough to keep every thread busy while the
 * one in order is still running, few enough to hold memory flat. */
#define WINDOW_PER_JOB 4u

typedef struct {
  const SearchPool *pool;
  GMutex lock;
  GCond ready;
  gpointer *slot;      /* [WINDOW] results of items next .. next + window - 1 */
  gboolean *filled;
  guint window;
} Shared;

typedef struct {
  Shared *sh;
  guint k; /* position in the pool's list */
} Task;

static guint index_of(const SearchPool *p, guint k) { return p->offset + k * MAX(1u, p->stride); }

static gboolean stopped(const SearchPool *p) { return p->stop && g_atomic_int_get(p->stop) != 0; }

static void work(gpointer data, gpointer user) {
  (void)user;
  Task *t = data;
  Shared *sh = t->sh;
  /* an item still queued when the run is stopped is not started: NULL */
  gpointer r = stopped(sh->pool) ? NULL : sh->pool->fn(index_of(sh->pool, t->k), sh->pool->user);
  g_mutex_lock(&sh->lock);
  sh->slot[t->k % sh->window] = r;
  sh->filled[t->k % sh->window] = TRUE;
  g_cond_broadcast(&sh->ready);
  g_mutex_unlock(&sh->lock);
  g_free(t);
}

gboolean search_pool_run(const SearchPool *p) {
  if (p->jobs <= 1) {
    for (guint k = 0; k < p->n; k++) {
      if (stopped(p))
        return FALSE;
      if (!p->done(index_of(p, k), p->fn(index_of(p, k), p->user), p->user))
        return FALSE;
    }
    return TRUE;
  }
  Shared sh = {.pool = p, .window = p->jobs * WINDOW_PER_JOB};
  g_mutex_init(&sh.lock);
  g_cond_init(&sh.ready);
  sh.slot = g_new0(gpointer, sh.window);
  sh.filled = g_new0(gboolean, sh.window);
  GThreadPool *tp = g_thread_pool_new(work, NULL, (gint)p->jobs, TRUE, NULL);
  guint pushed = 0, next = 0;
  gboolean ok = TRUE;
  while (next < p->n) {
    /* keep the window full */
    while (ok && pushed < p->n && pushed < next + sh.window && !stopped(p)) {
      Task *t = g_new(Task, 1);
      *t = (Task){&sh, pushed++};
      g_thread_pool_push(tp, t, NULL);
    }
    if (next >= pushed)
      break; /* stopped, and everything pushed has been handed over */
    g_mutex_lock(&sh.lock);
    while (!sh.filled[next % sh.window])
      g_cond_wait(&sh.ready, &sh.lock);
    gpointer r = sh.slot[next % sh.window];
    sh.filled[next % sh.window] = FALSE;
    g_mutex_unlock(&sh.lock);
    if (!r) /* not started (stopped): nothing after it is handed over */
      ok = FALSE;
    else if (ok)
      ok = p->done(index_of(p, next), r, p->user);
    else if (p->free_result)
      p->free_result(r);
    next++;
  }
  g_thread_pool_free(tp, FALSE, TRUE); /* waits for the threads */
  g_mutex_clear(&sh.lock);
  g_cond_clear(&sh.ready);
  g_free(sh.slot);
  g_free(sh.filled);
  return ok && next == p->n;
}

guint search_pool_cores(void) { return MAX(1u, g_get_num_processors()); }
