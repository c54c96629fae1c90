/* ptdsim sweep across machines (see sweep_mpi.h). */
#include "sweep_mpi.h"

#include <string.h>

#ifdef PTDSIM_HAVE_MPI
#include <mpi.h>
#endif

struct _SweepMpi {
  gboolean active;   /* MPI_Init was called */
  gboolean unusable; /* launched as one of several ranks by a build without MPI */
  int rank, size;
};

void sweep_row_free(gpointer row) {
  SweepRow *r = row;
  if (r) {
    g_free(r->text);
    g_free(r);
  }
}

/* Whether a launcher started this process as one rank of many (OpenMPI,
 * and the PMI variables of other launchers). */
static gboolean launched_by_mpirun(void) {
  return g_getenv("OMPI_COMM_WORLD_SIZE") || g_getenv("PMI_SIZE") || g_getenv("PMIX_RANK");
}

SweepMpi *sweep_mpi_init(int *argc, char ***argv) {
  SweepMpi *m = g_new0(SweepMpi, 1);
  m->size = 1;
#ifdef PTDSIM_HAVE_MPI
  if (launched_by_mpirun()) {
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided); /* MPI is called from the main thread only */
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    m->active = TRUE;
  }
#else
  (void)argc, (void)argv;
  /* every rank would run the whole sweep and write it: refuse */
  const char *n = g_getenv("OMPI_COMM_WORLD_SIZE") ? g_getenv("OMPI_COMM_WORLD_SIZE") : g_getenv("PMI_SIZE");
  m->unusable = launched_by_mpirun() && n && g_ascii_strtoull(n, NULL, 10) > 1;
#endif
  return m;
}

gboolean sweep_mpi_usable(const SweepMpi *m) { return !m->unusable; }

guint sweep_mpi_size(const SweepMpi *m) { return (guint)m->size; }
gboolean sweep_mpi_is_writer(const SweepMpi *m) { return m->rank == 0; }

gboolean sweep_mpi_agree(SweepMpi *m, gboolean root_ok, guint64 *skipped) {
#ifdef PTDSIM_HAVE_MPI
  if (m->active) {
    unsigned long long v[2] = {root_ok ? 1 : 0, *skipped};
    MPI_Bcast(v, 2, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    *skipped = v[1];
    return v[0] != 0;
  }
#else
  (void)m;
#endif
  return root_ok;
}

void sweep_mpi_finish(SweepMpi *m) {
  if (!m)
    return;
#ifdef PTDSIM_HAVE_MPI
  if (m->active)
    MPI_Finalize();
#endif
  g_free(m);
}

/* --- one process --- */

typedef struct {
  SearchPoolFn make;
  gboolean (*put)(guint64 k, SweepRow *row, gpointer user);
  gpointer user;
} Local;

static gpointer local_make(guint k, gpointer data) {
  Local *l = data;
  return l->make(k, l->user);
}

static gboolean local_done(guint k, gpointer result, gpointer data) {
  Local *l = data;
  return l->put(k, result, l->user);
}

#ifdef PTDSIM_HAVE_MPI
enum { TAG_ROW = 1, TAG_END = 2 };

typedef struct {
  SweepMpi *m;
  SearchPoolFn make;
  gpointer user;
  gboolean (*put)(guint64 k, SweepRow *row, gpointer user);
  GHashTable *waiting; /* rank 0: rows that came before their turn, k -> SweepRow* */
  guint64 next, total;
  guint ended;    /* ranks that sent their end */
  gboolean failed; /* put refused a row: the rest are received and dropped */
} Dist;

/* Another rank's row, as bytes: k, status, text. */
static void send_row(guint64 k, const SweepRow *r) {
  gsize len = strlen(r->text), size = 8 + 4 + len;
  guint8 *buf = g_malloc(size);
  memcpy(buf, &k, 8);
  gint32 st = r->status;
  memcpy(buf + 8, &st, 4);
  memcpy(buf + 12, r->text, len);
  MPI_Send(buf, (int)size, MPI_BYTE, 0, TAG_ROW, MPI_COMM_WORLD);
  g_free(buf);
}

/* Rank 0: hands over every row whose turn has come. */
static void drain(Dist *d) {
  SweepRow *r;
  while ((r = g_hash_table_lookup(d->waiting, &d->next))) {
    g_hash_table_steal(d->waiting, &d->next);
    if (!d->failed && !d->put(d->next, r, d->user))
      d->failed = TRUE;
    else if (d->failed)
      sweep_row_free(r);
    d->next++;
  }
}

static void keep(Dist *d, guint64 k, SweepRow *r) {
  guint64 *key = g_new(guint64, 1);
  *key = k;
  g_hash_table_insert(d->waiting, key, r);
}

/* Rank 0: one message (blocking or not). */
static gboolean receive(Dist *d, gboolean block) {
  MPI_Status status;
  int flag = 1;
  if (block)
    MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &status);
  else
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &status);
  if (!flag)
    return FALSE;
  int size;
  MPI_Get_count(&status, MPI_BYTE, &size);
  guint8 *buf = g_malloc((gsize)size + 1);
  MPI_Recv(buf, size, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (status.MPI_TAG == TAG_END)
    d->ended++;
  else {
    guint64 k;
    gint32 st;
    memcpy(&k, buf, 8);
    memcpy(&st, buf + 8, 4);
    SweepRow *r = g_new(SweepRow, 1);
    r->text = g_strndup((const char *)buf + 12, (gsize)size - 12);
    r->status = st;
    keep(d, k, r);
  }
  g_free(buf);
  return TRUE;
}

static gpointer dist_make(guint k, gpointer data) {
  Dist *d = data;
  return d->make(k, d->user);
}

static gboolean root_done(guint k, gpointer result, gpointer data) {
  Dist *d = data;
  keep(d, k, result);
  while (receive(d, FALSE))
    ;
  drain(d);
  return TRUE;
}

static gboolean worker_done(guint k, gpointer result, gpointer data) {
  (void)data;
  send_row(k, result);
  sweep_row_free(result);
  return TRUE;
}
#endif

gboolean sweep_mpi_run(SweepMpi *m, guint64 skipped, guint64 total, guint jobs, const volatile gint *stop,
                       SearchPoolFn make, gboolean (*put)(guint64 k, SweepRow *row, gpointer user), gpointer user) {
  if (!m->active || m->size == 1) {
    Local l = {make, put, user};
    SearchPool pool = {(guint)(total - skipped), (guint)skipped, 1, jobs, local_make, local_done, sweep_row_free, &l,
                       stop};
    return search_pool_run(&pool);
  }
#ifdef PTDSIM_HAVE_MPI
  guint R = (guint)m->size, r = (guint)m->rank;
  guint64 left = total - skipped;
  guint mine = (guint)(left > r ? (left - r + R - 1) / R : 0);
  Dist d = {m, make, user, put, NULL, skipped, total, 0, FALSE};
  SearchPool pool = {mine, (guint)(skipped + r), R, jobs, dist_make, r == 0 ? root_done : worker_done,
                     sweep_row_free, &d, stop};
  if (r == 0) {
    d.waiting = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, sweep_row_free);
    search_pool_run(&pool);
    while (d.ended < R - 1) /* every other rank's rows, then its end */
      receive(&d, TRUE);
    drain(&d);
    gboolean complete = d.next == total && !d.failed;
    g_hash_table_destroy(d.waiting); /* rows after a gap (a stopped run): run again on --resume */
    return complete;
  }
  search_pool_run(&pool);
  guint64 none = 0;
  MPI_Send(&none, 8, MPI_BYTE, 0, TAG_END, MPI_COMM_WORLD);
  return TRUE;
#else
  return FALSE;
#endif
}
