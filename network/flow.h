/* ptdsim — flow-level network: flows share link bandwidth max-min fairly.
 *
 * A flow carries `bytes` over a set of links; on link l it loads coef_l times
 * its rate (1 for a plain path; a share when adaptive routing spreads it over
 * equal-cost paths; the number of ring edges that cross l when one flow stands
 * for a whole ring channel, whose edges all move at the same rate).  Rates are
 * the weighted max-min fair allocation (Bertsekas & Gallager, "Data
 * Networks", section 6.5.2, progressive filling): all unfrozen flows grow at
 * the same rate until some link saturates,
 *     sum_f coef_lf * rate_f = capacity_l,
 * its flows freeze, and the rest go on.  SimGrid's LMM solver (Casanova et
 * al., "Versatile, scalable and accurate simulation of distributed
 * applications and platforms", JPDC 2014) works the same way.
 *
 * Incremental: when flows start or end, only the flows they can affect are
 * re-solved: those reachable through links that flows fill (a flow is never
 * limited by a link with room to spare), grown while a link the re-solve
 * fills is shared with a flow left out, and of those only the flows at least
 * as fast as the slowest flow that ended (or the least a started flow can
 * get): progressive filling is the same with or without a flow below the
 * level at which it freezes.  The result is the exact max-min allocation.
 * A re-solve copies what it needs into dense arrays (hops by link index in
 * the re-solve, per-link lists of its flows) and fills with a lazy-key heap
 * of link levels (links that cannot saturate left out): O((F_c * hops +
 * L_c) log L_c) for the F_c flows and L_c links it covers, with few cache
 * misses.
 *
 * Time is integer nanoseconds; a flow's completion is the ns at or after its
 * remaining bytes reach zero at its current rate.
 */
#pragma once

#include <glib.h>
#include <stdint.h>

#include "../topologies/fabric.h"

typedef struct _NetFlows NetFlows;

/* `capacity[l]` in bytes/s for links 0..n_links-1. */
NetFlows *net_flows_new(guint n_links, const double *capacity);
void net_flows_free(NetFlows *net);
/* With no flow active, returns the net to the state net_flows_new left it
 * in (every link's load and every counter back to zero), at the cost of the
 * links it has used, not of the whole graph. */
void net_flows_reset(NetFlows *net);

/* Starts a flow at `now_ns`; a link may appear several times in `hops`
 * (coefficients add).  Returns its id (ids are reused after a flow ends). */
guint net_flow_add(NetFlows *net, const TopoHop *hops, guint n_hops, double bytes, int64_t now_ns);
/* Ends a flow early (or forgets a finished one that was not yet collected). */
void net_flow_remove(NetFlows *net, guint flow, int64_t now_ns);
/* Current rate in bytes/s. */
double net_flow_rate(const NetFlows *net, guint flow);
/* Earliest completion among active flows, or -1 when none. */
int64_t net_flow_next(NetFlows *net);
/* Ends every flow that completes at or before `now_ns`, appending their ids
 * (in completion order, ties by start order) to `finished`, and re-solves
 * what they touched. */
void net_flow_advance(NetFlows *net, int64_t now_ns, GArray *finished);
guint net_flow_n_active(const NetFlows *net);
/* Between hold and release, starts and ends only gather what they touch;
 * release re-solves it all at once at `now_ns` (many flows starting or
 * ending at the same instant cost one re-solve).  Rates and completions are
 * stale until then. */
void net_flow_hold(NetFlows *net);
void net_flow_release(NetFlows *net, int64_t now_ns);
/* Work counters: components re-solved, flows whose rate was recomputed. */
void net_flow_stats(const NetFlows *net, guint64 *solves, guint64 *flows_touched);
