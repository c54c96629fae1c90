/* ptdsim sweep across machines: `mpirun -n R ptdsim sweep ...` splits the
 * grid over R ranks (rank r takes rows r, r + R, r + 2R, ... after the
 * resumed ones), each on all its cores; every rank sends its rows to rank 0,
 * which writes them in grid order, so the output is the same for any R.
 *
 * Built with MPI (OpenMPI found at configure time) and started by mpirun,
 * these use MPI; otherwise they are the one-process case (size 1, the
 * writer), and nothing else of MPI is touched. */
#pragma once

#include <glib.h>

#include "../search/pool.h"

typedef struct _SweepMpi SweepMpi;

/* A finished row: its text (with its newline) and its status. */
typedef struct {
  char *text;
  gint status;
} SweepRow;

void sweep_row_free(gpointer row);

/* Starts MPI if this process was launched by mpirun (and MPI is built in). */
SweepMpi *sweep_mpi_init(int *argc, char ***argv);
guint sweep_mpi_size(const SweepMpi *m);
/* Rank 0 (or the one process): it writes the output and the messages. */
gboolean sweep_mpi_is_writer(const SweepMpi *m);
/* Every rank: whether rank 0 could start (its output file), and its count
 * of rows already done (resumed), into *skipped. */
gboolean sweep_mpi_agree(SweepMpi *m, gboolean root_ok, guint64 *skipped);

/* Runs rows skipped .. total-1 over the ranks: `make` (a SearchPoolFn
 * returning a SweepRow) on every rank's threads, `put` on rank 0 for each
 * row in order.  `stop` ends every rank's run early (the rows done are still
 * delivered in order, up to the first one missing).  TRUE when every row was
 * put. */
gboolean sweep_mpi_run(SweepMpi *m, guint64 skipped, guint64 total, guint jobs, const volatile gint *stop,
                       SearchPoolFn make, gboolean (*put)(guint64 k, SweepRow *row, gpointer user), gpointer user);
void sweep_mpi_finish(SweepMpi *m);
/* FALSE when mpirun started several copies of a build without MPI. */
gboolean sweep_mpi_usable(const SweepMpi *m);
