/* ptdsim — the command-line program: a table of verbs, each with its own
 * options and --help. */
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/text.h"
#include "cli.h"

typedef struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *description;
} Verb;

static const Verb verbs[] = {
    {"run", cli_run, "simulate one configuration (text report or --format json)"},
    {"figure", cli_figure, "regenerate a table or figure of the papers (figure --list)"},
    {"report", cli_report, "print a run's report again from its trace (run --trace, figure --save-traces)"},
    {"sweep", cli_sweep, "simulate every configuration of a grid of options, one CSV or JSONL row each"},
    {"models", cli_models, "list the built-in models: shape, parameters and where each comes from"},
    {"clusters", cli_clusters, "list the built-in clusters and device profiles; one by name or file with every number's source"},
    {"plan", cli_plan, "search t, p, d, b, v and recomputation for a model and GPU budget; rank by time to train"},
    {"fit", cli_fit, "turn calibration measurements into a device profile (fit --synthesize: the reverse)"},
    {"collective", cli_collective, "predict an nccl-tests table for one collective on the cluster's network"},
    {"replay", cli_replay, "replay one step of a torch.profiler trace on the engine; what-ifs: CUDA graphs, another GPU"},
    {"bench", cli_bench, "the simulator's own speed: events per second, seconds per configuration, memory"},
};

static void usage(FILE *to) {
  fprintf(to, "Usage: ptdsim VERB [OPTIONS]\n\n"
              "Predicts how fast a large language model trains on a GPU cluster under tensor, pipeline and\n"
              "data parallelism (Megatron-LM PTD-P), by discrete-event simulation over cost models.\n\nVerbs:\n");
  for (guint i = 0; i < G_N_ELEMENTS(verbs); i++)
    fprintf(to, "  %-10s %s\n", verbs[i].name, verbs[i].description);
  fprintf(to, "\n'ptdsim VERB --help' explains a verb's options; 'ptdsim --version' prints the version.\n"
              "Start with: ptdsim figure megatron-table1\n");
}

/* What ptdsim printed must have reached stdout: a full disk or a closed
 * pipe is an error, not a success with a truncated report.  Run at exit,
 * so that GOption's own exit after --help is checked too. */
static void check_stdout(void) {
  gboolean failed = fflush(stdout) != 0 || ferror(stdout);
  int err = errno;
  if (fclose(stdout) != 0 && !failed) {
    failed = TRUE;
    err = errno;
  }
  if (failed) {
    fprintf(stderr, "ptdsim: cannot write to standard output: %s\n", g_strerror(err ? err : EIO));
    fflush(stderr);
    _exit(1);
  }
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
    printf("ptdsim %s\n", PTDSIM_VERSION);
    return 0;
  }
  for (guint i = 0; i < G_N_ELEMENTS(verbs); i++)
    if (strcmp(argv[1], verbs[i].name) == 0) {
      char *prg = g_strdup_printf("ptdsim %s", verbs[i].name);
      g_set_prgname(prg);
      g_free(prg);
      return verbs[i].run(argc - 1, argv + 1);
    }
  char *verb = ptd_echo(argv[1], PTD_ECHO_MAX, FALSE);
  fprintf(stderr, "ptdsim: unknown verb '%s' (ptdsim --help lists them)\n", verb);
  g_free(verb);
  return 2;
}

int main(int argc, char **argv) {
  setlocale(LC_ALL, "C"); /* numbers print and parse the same everywhere */
  atexit(check_stdout);
  errno = 0;
  return dispatch(argc, argv);
}
