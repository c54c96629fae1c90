/* ptdsim — command-line verbs (one handler per verb, each with its own
 * GOptionContext) and what they share. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "../search/options.h"
#include "../plan/plan.h"

typedef enum { CLI_TEXT, CLI_JSON } CliFormat;

/* A verb's command line: its GOptionContext, and every option it registered
 * (args.c), so that parsing can refuse an option given twice (GOption lets
 * the second silently win) and suggest the nearest name for an unknown one. */
typedef struct {
  GOptionContext *ctx;
  GPtrArray *known;
  GPtrArray *strings; /* help texts made here, which GOption points to */
} CliArgs;

void cli_args_init(CliArgs *a, const char *parameter_string);
/* Adds entries to the main group / to `group` (which the caller adds). */
void cli_args_add(CliArgs *a, const GOptionEntry *entries);
void cli_args_add_group(CliArgs *a, GOptionGroup *group, const GOptionEntry *entries);
/* Lets an option already added be given more than once (--set, --zip). */
void cli_args_repeatable(CliArgs *a, const char *long_name);
/* Checks for repeated and unknown options, then parses with GOption. */
gboolean cli_args_parse(CliArgs *a, int *argc, char ***argv, GError **error);
void cli_args_clear(CliArgs *a);

/* Registers the configuration options (search/options.h) as the main
 * group of `a`, parsed into `cfg` as they are read: a bad value is an error
 * of the parse.  Flags take no value. */
void cli_config_add(CliArgs *a, SearchConfig *cfg);
gboolean cli_format(const char *text, CliFormat *out, GError **error);
/* Loads cluster and profile (the cluster's default profile when none given). */
gboolean cli_load_machine(const char *cluster_name, const char *profile_name, TopoCluster **cluster,
                          ModelProfile **profile, GError **error);
/* The same with the cluster resized to `nodes` nodes (--nodes; 0: its own). */
gboolean cli_load_machine_sized(const char *cluster_name, guint nodes, const char *profile_name,
                                TopoCluster **cluster, ModelProfile **profile, GError **error);

/* Prints a JSON value on stdout with a trailing newline, its numbers in the
 * fewest digits that read back exactly (which rewrites them in `json`). */
void cli_print_json(cJSON *json);
/* Prints a run's result (trace_run's JSON) as its JSON or as the text
 * report, as `fmt` says. */
void cli_print_run(cJSON *run, CliFormat fmt);
/* Prints "ptdsim: MESSAGE" on stderr; returns the exit code to use. */
int cli_fail(GError *error);

int cli_run(int argc, char **argv);
int cli_figure(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_fit(int argc, char **argv);
int cli_collective(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_report(int argc, char **argv);
int cli_sweep(int argc, char **argv);
int cli_models(int argc, char **argv);
int cli_clusters(int argc, char **argv);
int cli_replay(int argc, char **argv);
/* A whole number option given as text (strictly decimal digits), lo..hi. */
gboolean cli_count(const char *flag, const char *text, guint lo, guint hi, guint *out, GError **error);
/* cli_count, or `dflt` when the option was not given (text NULL). */
gboolean cli_count_or(const char *flag, const char *text, guint lo, guint hi, guint dflt, guint *out, GError **error);
