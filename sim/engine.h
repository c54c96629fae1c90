/* ptdsim — discrete-event engine.
 *
 * The engine knows streams and ops, nothing about transformers.  A stream runs
 * its ops in issue order, like a CUDA stream.  An op sits on one or more
 * streams (a collective occupies the communication stream of every member
 * GPU; a point-to-point transfer occupies the sender's send stream and the
 * receiver's receive stream) and starts when it is at the head of all of them,
 * none of them is busy, and every op it depends on has finished.
 *
 * Time is an integer number of nanoseconds.  Completion events are ordered by
 * (time, sequence number); the sequence number grows with every event pushed,
 * so equal-time events are handled in a total, reproducible order.  The event
 * heap is allocated once (one slot per op: every op completes exactly once),
 * so running the simulation allocates nothing per event.
 *
 * When every op has a fixed duration (no network model installed, or no
 * network op), an op's start is the latest end among its stream
 * predecessors and dependencies, whatever the order of equal-time events;
 * the engine then times the graph in one pass over a topological order
 * instead of the event loop, with the same results.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

typedef int64_t SimTime; /* nanoseconds */

/* The longest time ptdsim represents, 1e7 s (about 116 days): an op or an
 * iteration beyond it is an error, not a wrapped-around time.  Every time
 * stays at most one past it, so sums of two never overflow. */
#define SIM_TIME_MAX_S 1e7
#define SIM_TIME_MAX ((SimTime)10000000000000000) /* SIM_TIME_MAX_S in ns */
/* Seconds to nanoseconds, rounded; NaN, negative (below -0.5 ns) or beyond
 * SIM_TIME_MAX_S gives SIM_TIME_MAX + 1, which sim_engine_run refuses. */
SimTime sim_time_ns(double seconds);
/* a + b for times of at most SIM_TIME_MAX + 1, capped there. */
SimTime sim_time_add(SimTime a, SimTime b);

typedef struct _SimEngine SimEngine;

/* What an op is, for accounting and traces; the engine does not look at it. */
typedef struct {
  guint16 category; /* caller-defined class (compute, tp comm, ...) */
  guint16 pass;     /* caller-defined (forward, backward, ...) */
  gint32 stage;     /* caller-defined labels, -1 when unused */
  gint32 chunk;
  gint32 microbatch;
  gint32 layer;
} SimOpTag;

SimEngine *sim_engine_new(void);
void sim_engine_free(SimEngine *engine);

/* Adds a stream; returns its id (0, 1, 2, ...).  `gpu` groups streams for
 * reporting only. */
guint sim_engine_add_stream(SimEngine *engine, guint gpu);
guint sim_engine_n_streams(const SimEngine *engine);
/* A straggler: ops issued afterwards on `stream` take duration / speed
 * (0 < speed <= 1); an op on several streams runs at the slowest one's.
 * Network ops end when their network says, whatever the speed. */
void sim_engine_set_stream_speed(SimEngine *engine, guint stream, double speed);

/* Issues an op on `n_streams` streams (in issue order on each) and returns its
 * id.  The duration is fixed at issue time. */
guint sim_engine_add_op(SimEngine *engine, SimTime duration_ns, const guint *streams, guint n_streams,
                        const SimOpTag *tag);
/* Like sim_engine_add_op, but the op's place on stream i is `positions[i]`
 * instead of its creation order: a stream runs its ops in increasing
 * position (ties in creation order).  Ops added without positions take their
 * id as position.  Point-to-point transfers use this so that each one sits in
 * the sender's program order on the send stream and in the receiver's on the
 * receive stream. */
guint sim_engine_add_op_at(SimEngine *engine, SimTime duration_ns, const guint *streams, const guint64 *positions,
                           guint n_streams, const SimOpTag *tag);
/* Convenience for an op on a single stream. */
guint sim_engine_add_op1(SimEngine *engine, SimTime duration_ns, guint stream, const SimOpTag *tag);
/* An op's position on one of its streams (its id where none was given),
 * and a new one, before the run: for ops issued in one order and run in
 * another (DualPipe's overlapped F&B).  Setting a stream the op is not on
 * does nothing. */
guint64 sim_engine_op_position(const SimEngine *engine, guint op, guint stream);
void sim_engine_set_op_position(SimEngine *engine, guint op, guint stream, guint64 position);

/* An op whose end is decided by a network model rather than a fixed
 * duration (a transfer whose flows share links with others in flight).  The
 * engine tells the model when such an op starts; the model says when its next
 * event is due and, when asked to advance to that time, which ops ended.
 * Events of the engine's own heap come first at equal times. */
typedef struct {
  gpointer data;
  void (*start)(gpointer data, guint op, SimTime now);
  SimTime (*next)(gpointer data); /* -1 when nothing is in flight */
  void (*advance)(gpointer data, SimTime now, GArray *ended_ops /* guint */);
} SimEngineNetwork;

/* Installs the network model (copied); NULL removes it. */
void sim_engine_set_network(SimEngine *engine, const SimEngineNetwork *network);
/* Like sim_engine_add_op_at, for an op that ends when the network says
 * (without a network model installed it takes no time). */
guint sim_engine_add_net_op(SimEngine *engine, const guint *streams, const guint64 *positions, guint n_streams,
                            const SimOpTag *tag);
/* Makes `op` an op that ends when the network says, in place (for a run
 * again on the same graph). */
void sim_engine_op_to_network(SimEngine *engine, guint op);

/* Compute sharing its GPU with collectives.  NCCL runs a collective as
 * kernels on every member GPU, one thread block per channel, each on an SM
 * of its own, beside whatever compute runs there: while the collective
 * runs, the compute has fewer SMs.  The ops of a stream marked with
 * sim_engine_set_stream_holds_sms hold SMs of the stream's GPU while they
 * run.  An op given a contention factor f (>= 1) with
 * sim_engine_set_op_contended progresses 1/f as fast for as long as one of
 * those streams of its GPU (its first stream's) is running an op: its
 * remaining work is carried over whenever that changes.  Any such op makes
 * the run an event loop (the one-pass timing needs fixed durations). */
void sim_engine_set_stream_holds_sms(SimEngine *engine, guint stream);
void sim_engine_set_op_contended(SimEngine *engine, guint op, double factor);
/* Whether some op is contended (the run then uses the event loop). */
gboolean sim_engine_has_contention(const SimEngine *engine);

/* `after` may not start before `before` has finished. */
void sim_engine_add_dep(SimEngine *engine, guint before, guint after);

guint sim_engine_n_ops(const SimEngine *engine);
/* The dependencies as (before, after) pairs, n_pairs of them. */
const guint *sim_engine_deps(const SimEngine *engine, guint *n_pairs);
/* Ops whose end the network decides: how many, and whether `op` is one. */
guint sim_engine_n_net_ops(const SimEngine *engine);
gboolean sim_engine_op_is_net(const SimEngine *engine, guint op);
/* Makes room for about n_ops ops, n_slots (op, stream) places and n_deps
 * dependencies in all, so that building a large graph does not copy it as
 * it grows.  Only a hint: more may be added. */
void sim_engine_reserve(SimEngine *engine, guint n_ops, guint n_slots, guint n_deps);

/* Runs to completion.  Returns FALSE and sets `error` if some op can never
 * start (a dependency cycle, or a dependency against stream order), or if
 * an op or the whole run lasts longer than SIM_TIME_MAX. */
gboolean sim_engine_run(SimEngine *engine, GError **error);

/* Results, valid after a successful run. */
SimTime sim_engine_op_start(const SimEngine *engine, guint op);
SimTime sim_engine_op_end(const SimEngine *engine, guint op);
const SimOpTag *sim_engine_op_tag(const SimEngine *engine, guint op);
guint sim_engine_op_n_streams(const SimEngine *engine, guint op);
const guint *sim_engine_op_streams(const SimEngine *engine, guint op);
SimTime sim_engine_makespan(const SimEngine *engine);
guint64 sim_engine_n_events(const SimEngine *engine);

/* The ops of one stream in issue order. */
const guint *sim_engine_stream_ops(const SimEngine *engine, guint stream, guint *n_ops);
guint sim_engine_stream_gpu(const SimEngine *engine, guint stream);

#define SIM_ENGINE_ERROR (sim_engine_error_quark())
GQuark sim_engine_error_quark(void);
typedef enum { SIM_ENGINE_ERROR_DEADLOCK, SIM_ENGINE_ERROR_TOO_LONG } SimEngineError;
