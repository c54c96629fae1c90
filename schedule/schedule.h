/* ptdsim — pipeline schedules: the order in which one pipeline stage runs
 * its forward and backward passes.  Schedules decide order only; cost comes
 * from models/, time from the engine.
 *
 *  GPipe (Huang et al. 2019): all m forwards, then all m backwards.
 *  1F1B / PipeDream-Flush (Narayanan et al. 2021, SC21 section 2.2.1):
 *    stage s runs p-s-1 warm-up forwards, then alternates one forward and
 *    one backward, then drains the remaining backwards.
 *  Interleaved 1F1B (SC21 section 2.2.2): v model chunks per stage; the
 *    order of Megatron-LM's forward_backward_pipelining_with_interleaving:
 *    (p-s-1)*2 + (v-1)*p warm-up forwards (all of them when m == p), chunk
 *    of the k-th forward (k mod pv) / p, of the k-th backward v-1 minus that,
 *    microbatch (k / pv) * p + k mod p.
 *
 * Zero-bubble schedules split a backward pass in two (Qi et al., "Zero
 * Bubble Pipeline Parallelism", ICLR 2024, section 2): B, the gradient with
 * respect to the stage's input, which the previous stage waits for, and W,
 * the gradient with respect to its weights, which nobody waits for.  An item
 * is then F, B (the input gradient alone: SIM_GRAD_INPUT) or W; schedules
 * that do not split run the whole backward (SIM_GRAD_ALL) as one item.
 *
 *  zb-h1 (Qi et al. section 3.1, figure 3): 1F1B's warm-up; in the steady
 *    part stage s defers its first s weight passes, then follows every
 *    input-gradient pass with the oldest W; the W still owed run at the end.
 *    The order of torch.distributed.pipelining's
 *    ScheduleInterleavedZeroBubble with one chunk (schedules.py,
 *    _get_1f1b_rank_ops with num_1f1b_microbatches = rank).  Peak in-flight
 *    microbatches p, as 1F1B.
 *  zb-h2 (Qi et al. section 3.1, figure 4): extra forwards in the warm-up
 *    fill the time before the first B, and the W at the tail turn the
 *    trapezoid into a parallelogram: here the order ZB's heuristic
 *    (sim_schedule_greedy) finds for T_F = T_B = T_W with 2p-1 microbatches
 *    in flight, whose stages then run without a gap.
 *  interleaved-zb (ZB-1P over v chunks, torch.distributed.pipelining's
 *    ScheduleInterleavedZeroBubble): (v-1)p + p-s-1 warm-up forwards, chunks
 *    in rounds of p microbatches, W deferred as zb-h1.
 *  zb-v (Qi et al. section 6, figure 8; torch's ScheduleZBVZeroBubble): two
 *    chunks per stage in a V: stage s holds virtual stages s and 2p-1-s,
 *    so the first stage holds the first and the last; warm-up 2(p-s)-1
 *    forwards of chunk 0, s pairs (chunk 1, chunk 0), p-s triples F B W of
 *    chunk 1; then F B W of chunk 0 and of chunk 1 in turn; cool-down B's
 *    and the W owed.
 *  dualpipe (DeepSeek-V3 technical report, arXiv:2412.19437, section 3.2.1
 *    and figure 5; deepseek-ai/DualPipe dualpipe/dualpipe.py, step 1 to 8):
 *    microbatches fed from both ends, half in each direction; stage s holds
 *    stage s of the forward pipeline (chunk 0) and stage p-1-s of the
 *    reverse one (chunk 1), two copies of the parameters.  A paired forward
 *    and backward chunk ("F&B", _forward_backward_chunk) starts once both
 *    inputs have come, and its compute takes F + B on the stage's compute
 *    stream: the overlap hides communication, and with no expert
 *    all-to-all a stage's point-to-point transfers already run beside its
 *    compute.
 *  dualpipev (DualPipe's "cut in half" V variant; deepseek-ai/DualPipe
 *    dualpipe/dualpipev.py, torch's ScheduleDualPipeV): the eight steps of
 *    DualPipe on the V placement of zb-v, microbatches from one end.
 *  zb-1p, zb-2p, zb-auto (Qi et al. section 3.3, sail-sg's scheduler/zb.py):
 *    ZB's automatic schedule for the stages' F, B, W times (--stage-times,
 *    else the cost model's compute times) and a limit of p, 2p, or
 *    --activation-limit GiB worth of microbatches in flight
 *    (sim_schedule_zb_auto).
 *  file (--schedule-file): a user's per-rank lists of actions in the format
 *    of torch.distributed.pipelining (sim_schedule_file_load).
 */
#pragma once

#include <glib.h>

#include "../base/text.h"


typedef enum {
  SIM_SCHEDULE_GPIPE,
  SIM_SCHEDULE_1F1B,
  SIM_SCHEDULE_INTERLEAVED,
  SIM_SCHEDULE_TERAPIPE,
  /* the backward split into input and weight gradients */
  SIM_SCHEDULE_ZB_H1,
  SIM_SCHEDULE_ZB_H2,
  SIM_SCHEDULE_INTERLEAVED_ZB,
  SIM_SCHEDULE_ZB_V,
  SIM_SCHEDULE_DUALPIPE,
  SIM_SCHEDULE_DUALPIPEV,
  SIM_SCHEDULE_FILE, /* --schedule-file */
  SIM_SCHEDULE_ZB_1P, /* ZB's heuristic with p, 2p or --activation-limit microbatches in flight */
  SIM_SCHEDULE_ZB_2P,
  SIM_SCHEDULE_ZB_AUTO
} SimSchedule;

#define SIM_SCHEDULE_ERROR (sim_schedule_error_quark())
GQuark sim_schedule_error_quark(void);

/* What a backward item computes. */
typedef enum { SIM_GRAD_ALL, SIM_GRAD_INPUT, SIM_GRAD_WEIGHT } SimGrad;

typedef struct {
  guint32 microbatch;
  guint16 chunk;
  guint8 forward;
  guint8 grad; /* SimGrad; SIM_GRAD_ALL for a forward */
  guint8 paired; /* a forward run overlapped with the backward after it (DualPipe's F&B): it starts once the
                  * inputs of both have come */
} SimItem;

/* Fills `out` (an array of SimItem) with stage `stage`'s order for a
 * built-in schedule. */
void sim_schedule_order(SimSchedule schedule, guint p, guint m, guint v, guint stage, GArray *out);

/* ZB's heuristic: the per-stage orders (orders[s], arrays of SimItem) of a
 * list schedule for pass times T_F, T_B (input gradient), T_W and a hop's
 * T_comm, with at most `limit` microbatches in flight per stage; one chunk
 * per stage. */
void sim_schedule_greedy(guint p, guint m, double tf, double tb, double tw, double tc, guint limit, GArray **orders);
/* The same with each stage's own times; without `wait_for_w` a W owed runs
 * whenever the stage would wait, even where it delays the next pass. */
void sim_schedule_greedy_staged(guint p, guint m, const double *tf, const double *tb, const double *tw, double tc,
                                guint limit, gboolean wait_for_w, GArray **orders);
/* The longest stage span (first pass's start to last pass's end) of
 * one-chunk orders run with those times; a huge value where they cannot
 * run to the end. */
double sim_schedule_span(guint p, guint m, GArray *const *orders, const double *tf, const double *tb, const double *tw,
                         double tc);
/* ZB's automatic schedule (zb.c: Qi et al. section 3.1, as
 * sail-sg's auto_schedule.py searches it): eight variants of its list
 * order for these per-stage times, with a microbatch's F adding mem_f to
 * its stage's activations, its B freeing mem_f - mem_w and its W mem_w
 * (what W keeps: model_layer_wgrad_kept_bytes), at most limit x mem_f per
 * stage; the shortest longest-stage span kept.  FALSE (orders unchanged)
 * where no variant fits the limit. */
gboolean sim_schedule_zb_heuristic(guint p, guint m, const double *tf, const double *tb, const double *tw, double tc,
                                   double mem_f, double mem_w, guint limit, GArray **orders);
/* zb-1p, zb-2p, zb-auto (Qi et al. section 3.3): ZB's heuristic above;
 * where none of its variants fits (a limit under two microbatches), a list
 * heuristic waiting for a W to fit and not, ZB-H1 where p microbatches fit
 * and ZB-H2 where 2p - 1 do, the shortest longest-stage span kept (ties:
 * the earlier).  `limit`: microbatches in flight per stage. */
void sim_schedule_zb_auto(guint p, guint m, const double *tf, const double *tb, const double *tw, double tc,
                          double mem_f, double mem_w, guint limit, GArray **orders);

/* --- the schedules as data: one row per schedule --- */

/* How a schedule runs the backward: whole (one item), split into B and W
 * (the zero-bubble family, DualPipe), or as its file says. */
typedef enum { SIM_BACKWARD_WHOLE, SIM_BACKWARD_SPLIT, SIM_BACKWARD_FILE } SimBackward;
/* The model chunks per stage: one; any v >= 1 (--chunks or
 * --layers-per-chunk); exactly two (the V, DualPipe's two directions); as
 * its file says. */
typedef enum { SIM_CHUNKS_ONE, SIM_CHUNKS_ANY, SIM_CHUNKS_TWO, SIM_CHUNKS_FILE } SimChunks;
/* Megatron's pipeline splits a schedule takes: any (--first-stage-layers,
 * --last-stage-layers, --account-for-*), the account-for ones alone, or
 * only the even split. */
typedef enum { SIM_SPLIT_ANY, SIM_SPLIT_ACCOUNT, SIM_SPLIT_EVEN } SimSplitRule;
/* Whether `ptdsim plan` tries a schedule: never; by default (the schedule
 * of its chunk kind that --schedule means when not given, which the planner
 * tries unless --schedule names others); under --schedule all; only when
 * named. */
typedef enum { SIM_SEARCH_NEVER, SIM_SEARCH_DEFAULT, SIM_SEARCH_ALL, SIM_SEARCH_NAMED } SimSearch;
/* How the order's steady part repeats, for the steady-state shortcut
 * (sim/steady.h): not proved here (every op simulated); every microbatch
 * (1F1B); every p microbatches (the interleaved schedule's chunks take p
 * microbatches in turn). */
typedef enum { SIM_PERIOD_NONE, SIM_PERIOD_MICROBATCH, SIM_PERIOD_ROUND } SimPeriod;

/* One schedule: its name, its order, its rules and its placement.  A new
 * schedule is an order function and a row of the table (schedule.c); the
 * validator (plan/validate.c), the placement of a plan's chunks
 * (plan/route.c), the option's words and help (search/options.c), the
 * planner's candidates (search/planner.c) and the PTD-P task graph (ptdp/:
 * blocking sends, where the embedding and logit layer sit, the steady
 * state) read the row. */
typedef struct {
  SimSchedule id;
  const char *name; /* as --schedule writes it ("file" for --schedule-file) */
  gboolean word;    /* --schedule takes the name */
  gboolean passes;  /* an order of microbatch passes that ptdp/ runs (TeraPipe's token pipeline: FALSE) */
  SimBackward backward;
  SimChunks chunks;
  gboolean copies;        /* chunk 1 holds chunk 0's layers again (DualPipe's two directions) */
  gboolean paired;        /* runs overlapped F&B pairs */
  SimSplitRule split;
  gboolean m_multiple_of_p; /* the microbatches a multiple of p */
  gboolean even_p_and_m;    /* an even p and an even number of microbatches */
  guint min_m_per_p;        /* at least this many times p microbatches (0: no rule) */
  /* Stage `stage`'s order of passes for p stages, m microbatches and v
   * chunks; NULL where the order is not fixed by (p, m, v): ZB's
   * heuristics (timed), TeraPipe, a file. */
  void (*order)(guint p, guint m, guint v, guint stage, GArray *out);
  gboolean timed;           /* ZB's heuristic: the order comes from the stages' times (sim_schedule_zb_auto) */
  guint limit_p;            /* timed: at most limit_p x p microbatches in flight (0: --activation-limit) */
  gboolean activation_limit; /* needs --activation-limit */
  /* The placement: virtual stages a microbatch passes through; the virtual
   * stage of chunk c of stage s for microbatch mb (G_MAXUINT where that
   * chunk never sees it), and back.  Functions of p, v and m alone (a
   * file's placement is its own). */
  guint (*route_len)(guint p, guint v);
  guint (*vstage)(guint p, guint v, guint m, guint s, guint c, guint mb);
  void (*place)(guint p, guint v, guint m, guint vs, guint mb, guint *s, guint *c);
  SimSearch search;
  guint search_rank; /* the planner's order among the schedules of a chunk kind (1 first) */
  /* One of Megatron-LM's schedules as SC21 ran them (GPipe, 1F1B,
   * interleaved 1F1B): blocking pipeline sends, the stage's layers placed
   * by Megatron's split, and the runs SC21 reports by its Eq. 3 */
  gboolean megatron_2021;
  SimPeriod period;
} SimScheduleInfo;

/* The table (*n rows), a schedule's row, and the row of a name (NULL:
 * none). */
const SimScheduleInfo *sim_schedule_table(guint *n);
const SimScheduleInfo *sim_schedule_info(SimSchedule s);
const SimScheduleInfo *sim_schedule_find(const char *name);
/* The schedule --schedule means when not given: the default row of one
 * chunk per stage, or of v chunks where chunks are given. */
SimSchedule sim_schedule_default(gboolean chunks_given);
/* "gpipe", "1f1b", ... as --schedule writes them ("file" for
 * --schedule-file). */
const char *sim_schedule_name(SimSchedule s);
/* The words --schedule takes and their SimSchedule, in table order; and as
 * text, "gpipe, 1f1b, ... or terapipe" (the schedules of passes first). */
const PtdWord *sim_schedule_words(void);
const char *sim_schedule_word_list(void);
/* Whether the schedule runs input and weight gradients as separate items. */
gboolean sim_schedule_splits(SimSchedule schedule);

/* A user's schedule (--schedule-file): the per-rank orders and the virtual
 * stage of each (rank, chunk). */
typedef struct SimScheduleFile SimScheduleFile;
struct SimScheduleFile {
  guint p, v, m;
  guint *stage_of; /* [s * v + c]: the virtual stage */
  guint *rank_of, *chunk_of; /* [vs] */
  GArray **orders; /* per rank: SimItem */
  gboolean splits; /* some backward is split into I and W */
};

/* Reads and checks a CSV of per-rank actions (row r: rank r's actions, in
 * order; a cell "2F0" is stage 2's forward of microbatch 0, F forward, B
 * the whole backward, I the input gradient, W the weight gradient; an empty
 * cell is idle; "(0F3;7B1)OVERLAP_F_B" a forward overlapped with a backward,
 * DualPipe's F&B), as torch.distributed.pipelining writes and reads them
 * (schedules.py: _Action.from_str, _dump_csv, _load_csv,
 * _validate_schedule).  Checks: p rows; every stage on one rank, v stages per
 * rank, stages 0..vp-1 present; every microbatch of every stage exactly one
 * F and either one B or one I and one W, F before B/I before W on its rank;
 * the whole schedule runs to the end when each action waits for its
 * predecessor on the previous (forward) or next (backward) stage (no
 * deadlock).  Errors are one line naming the rank and the action.  The
 * result stays alive for the process (plans refer to it). */
const SimScheduleFile *sim_schedule_file_load(const char *path, guint p, guint m, GError **error);
/* The most cells (actions and idle steps) a row of a schedule file may have. */
#define SIM_SCHEDULE_MAX_CELLS (1u << 20)
/* Parses the CSV text itself (the same checks; `name` labels errors). */
SimScheduleFile *sim_schedule_file_parse(const char *text, gsize len, const char *name, guint p, guint m,
                                         GError **error);
void sim_schedule_file_free(SimScheduleFile *f);
