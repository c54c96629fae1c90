/* ptdsim — max-min fair flow network (see flow.h). */
#include "flow.h"
#include "../base/heap.h"

#include <math.h>
#include <string.h>

typedef struct {
  guint link;
  guint pos; /* index of this flow's entry in the link's list */
  double coef;
} Hop;

typedef struct {
  Hop *hops;
  guint n_hops, hops_alloc;
  gboolean active;
  double remaining; /* bytes at `since` */
  double rate;      /* bytes/s */
  int64_t since;
  guint64 seq;      /* start order, breaks completion ties */
  guint32 version;  /* bumps when the completion time changes */
  guint32 mark;
} Flow;

typedef struct {
  guint flow, hop; /* the flow and the index of this link in its hops */
} Entry;

typedef struct {
  guint32 mark;
  guint cidx;    /* its index in comp_links while marked */
  double cap;
  double total;  /* committed load of every flow on it, bytes/s */
  double wsum;   /* sum of the coefficients of its flows */
  Entry *e;
  guint n, alloc;
  guint32 open;  /* == the net's mark: its flows join the re-solve */
  gboolean dirty; /* has carried a flow since the net was new or reset */
} Link;

typedef struct {
  int64_t time;
  guint64 seq;
  guint flow;
  guint32 version;
} Done;

typedef struct {
  double level;
  guint link; /* index in the re-solve's links */
} Sat;

/* A re-solve works on dense copies indexed by position in comp_flows /
 * comp_links, so that progressive filling touches a few small arrays instead
 * of the link and flow records scattered over the whole network (the cost of
 * a re-solve was cache misses, not arithmetic). */
typedef struct {
  guint nf_alloc, nl_alloc, nh_alloc, ne_alloc;
  guint nh;                  /* hops gathered so far */
  guint *fh_start;           /* per flow: first hop (nf + 1) */
  guint *fh_link;            /* per hop: link index in the re-solve */
  double *fh_coef;           /* per hop */
  double *f_rate, *f_next;   /* per flow: committed and provisional rate */
  guint8 *f_frozen;
  double *l_cap, *l_total, *l_weight, *l_load, *l_avail; /* per link */
  guint *l_start, *l_put;    /* per link: its flows in l_flow (nl + 1) */
  guint *l_flow;             /* flow indices in the re-solve */
} Dense;

struct _NetFlows {
  Link *links;
  guint n_links;
  GArray *flows; /* Flow */
  GArray *free_ids;
  guint n_active;
  guint64 seq;
  guint32 mark;
  GArray *done; /* Done, a binary min-heap on (time, seq) */
  /* scratch for re-solves */
  GArray *comp_flows, *comp_links, *sat;
  Dense d;
  guint64 solves, touched;
  guint hold; /* > 0: re-solves wait for net_flow_release */
  double floor; /* flows with a committed rate below it keep it (see below) */
  guint *slot;       /* per link: its index in the flow being added, or G_MAXUINT */
  GArray *dirty;     /* links that have carried a flow (net_flows_reset) */
};

/* --- two small binary heaps --- */

static inline gboolean done_before(const Done *a, const Done *b) {
  return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}
PTD_HEAP_DEFINE(done, Done, done_before)

static inline gboolean sat_before(const Sat *a, const Sat *b) {
  return a->level < b->level || (a->level == b->level && a->link < b->link);
}
PTD_HEAP_DEFINE(sat, Sat, sat_before)

/* --- the net --- */

NetFlows *net_flows_new(guint n_links, const double *capacity) {
  NetFlows *net = g_new0(NetFlows, 1);
  net->n_links = n_links;
  net->links = g_new0(Link, MAX(n_links, 1));
  net->slot = g_new(guint, MAX(n_links, 1));
  for (guint l = 0; l < n_links; l++)
    net->slot[l] = G_MAXUINT;
  for (guint l = 0; l < n_links; l++)
    net->links[l].cap = capacity[l];
  net->flows = g_array_new(FALSE, TRUE, sizeof(Flow));
  net->free_ids = g_array_new(FALSE, FALSE, sizeof(guint));
  net->done = g_array_new(FALSE, FALSE, sizeof(Done));
  net->comp_flows = g_array_new(FALSE, FALSE, sizeof(guint));
  net->comp_links = g_array_new(FALSE, FALSE, sizeof(guint));
  net->sat = g_array_new(FALSE, FALSE, sizeof(Sat));
  net->floor = INFINITY;
  net->dirty = g_array_new(FALSE, FALSE, sizeof(guint));
  return net;
}

void net_flows_reset(NetFlows *net) {
  g_return_if_fail(net->n_active == 0 && net->hold == 0);
  for (guint i = 0; i < net->dirty->len; i++) {
    Link *l = &net->links[g_array_index(net->dirty, guint, i)];
    *l = (Link){.cap = l->cap, .e = l->e, .alloc = l->alloc};
  }
  g_array_set_size(net->dirty, 0);
  for (guint i = 0; i < net->flows->len; i++)
    g_free(g_array_index(net->flows, Flow, i).hops);
  g_array_set_size(net->flows, 0);
  g_array_set_size(net->free_ids, 0);
  g_array_set_size(net->done, 0);
  g_array_set_size(net->comp_flows, 0);
  g_array_set_size(net->comp_links, 0);
  net->n_active = 0;
  net->seq = 0;
  net->mark = 0;
  net->solves = net->touched = 0;
  net->floor = INFINITY;
}

void net_flows_free(NetFlows *net) {
  if (!net)
    return;
  for (guint l = 0; l < net->n_links; l++)
    g_free(net->links[l].e);
  g_free(net->links);
  g_free(net->slot);
  for (guint i = 0; i < net->flows->len; i++)
    g_free(g_array_index(net->flows, Flow, i).hops);
  g_array_free(net->flows, TRUE);
  g_array_free(net->free_ids, TRUE);
  g_array_free(net->done, TRUE);
  g_array_free(net->comp_flows, TRUE);
  g_array_free(net->comp_links, TRUE);
  g_array_free(net->sat, TRUE);
  g_array_free(net->dirty, TRUE);
  Dense *d = &net->d;
  g_free(d->fh_start);
  g_free(d->fh_link);
  g_free(d->fh_coef);
  g_free(d->f_rate);
  g_free(d->f_next);
  g_free(d->f_frozen);
  g_free(d->l_cap);
  g_free(d->l_total);
  g_free(d->l_weight);
  g_free(d->l_load);
  g_free(d->l_avail);
  g_free(d->l_start);
  g_free(d->l_put);
  g_free(d->l_flow);
  g_free(net);
}

static Flow *flow_at(const NetFlows *net, guint id) { return &g_array_index(net->flows, Flow, id); }

/* A link is tight when its flows fill it: only through tight links can a
 * change reach other flows (a flow is never limited by a link with room to
 * spare).  The tolerance absorbs rounding in the running totals. */
static gboolean tight_bw(double total, double cap) { return total >= cap * (1 - 1e-7); }
static gboolean tight(const Link *l) { return tight_bw(l->total, l->cap); }

static void dense_flows(Dense *d, guint nf) {
  if (nf + 1 <= d->nf_alloc)
    return;
  d->nf_alloc = MAX(2 * d->nf_alloc, nf + 64);
  d->fh_start = g_renew(guint, d->fh_start, d->nf_alloc);
  d->f_rate = g_renew(double, d->f_rate, d->nf_alloc);
  d->f_next = g_renew(double, d->f_next, d->nf_alloc);
  d->f_frozen = g_renew(guint8, d->f_frozen, d->nf_alloc);
}

static void dense_hops(Dense *d, guint nh) {
  if (nh <= d->nh_alloc)
    return;
  d->nh_alloc = MAX(2 * d->nh_alloc, nh + 256);
  d->fh_link = g_renew(guint, d->fh_link, d->nh_alloc);
  d->fh_coef = g_renew(double, d->fh_coef, d->nh_alloc);
}

static void dense_links(Dense *d, guint nl) {
  if (nl + 1 <= d->nl_alloc)
    return;
  d->nl_alloc = MAX(2 * d->nl_alloc, nl + 64);
  d->l_cap = g_renew(double, d->l_cap, d->nl_alloc);
  d->l_total = g_renew(double, d->l_total, d->nl_alloc);
  d->l_weight = g_renew(double, d->l_weight, d->nl_alloc);
  d->l_load = g_renew(double, d->l_load, d->nl_alloc);
  d->l_avail = g_renew(double, d->l_avail, d->nl_alloc);
  d->l_start = g_renew(guint, d->l_start, d->nl_alloc);
  d->l_put = g_renew(guint, d->l_put, d->nl_alloc);
}

/* Marks link `id` as part of the re-solve and copies what the re-solve
 * needs of it. */
static void take_link(NetFlows *net, guint id) {
  Link *l = &net->links[id];
  l->mark = net->mark;
  l->cidx = net->comp_links->len;
  g_array_append_val(net->comp_links, id);
  dense_links(&net->d, l->cidx + 1);
  net->d.l_cap[l->cidx] = l->cap;
  net->d.l_total[l->cidx] = l->total;
}

/* The floor.  Progressive filling is the same, level by level, with or
 * without a flow f up to the level at which f freezes: below it f only adds
 * load to links that do not saturate there (f would freeze on them), so every
 * flow frozen below f's rate keeps its rate when f ends, and likewise when f
 * starts, below the rate f will get.  That rate is at least
 * min over f's links of capacity / (sum of the coefficients on it): a link
 * saturates at level mu when sum c_i r_i = capacity with every r_i <= mu.
 * Chaining this over a batch of starts and ends, flows whose committed rate
 * is below the least of the ended flows' rates and the started flows' bounds
 * keep their rates; the re-solve leaves them out (their load stays fixed on
 * the links they share), which keeps it exact. */

/* Grows the set of flows and links to re-solve from the marked seeds in
 * comp_flows / comp_links: a flow brings its links (and its hops are copied
 * into the dense arrays, by link index in the re-solve); a link brings its
 * flows only when it is tight or opened (breadth-first; *fi and *li carry
 * on where the last call stopped). */
static void collect(NetFlows *net, guint *fi, guint *li) {
  Dense *d = &net->d;
  double cut = net->floor * (1 - 1e-9);
  while (*fi < net->comp_flows->len || *li < net->comp_links->len) {
    dense_flows(d, net->comp_flows->len);
    for (; *fi < net->comp_flows->len; (*fi)++) {
      Flow *f = flow_at(net, g_array_index(net->comp_flows, guint, *fi));
      d->fh_start[*fi] = d->nh;
      d->f_rate[*fi] = f->rate;
      guint n_hops = f->active ? f->n_hops : 0; /* started and ended while held */
      dense_hops(d, d->nh + n_hops);
      for (guint h = 0; h < n_hops; h++) {
        Link *l = &net->links[f->hops[h].link];
        if (l->mark != net->mark)
          take_link(net, f->hops[h].link);
        d->fh_link[d->nh] = l->cidx;
        d->fh_coef[d->nh++] = f->hops[h].coef;
      }
    }
    d->fh_start[*fi] = d->nh;
    for (; *li < net->comp_links->len; (*li)++) {
      Link *l = &net->links[g_array_index(net->comp_links, guint, *li)];
      if (l->open != net->mark && !tight(l))
        continue;
      for (guint k = 0; k < l->n; k++) {
        Flow *f = flow_at(net, l->e[k].flow);
        if (f->mark != net->mark && f->rate >= cut) {
          f->mark = net->mark;
          g_array_append_val(net->comp_flows, l->e[k].flow);
        }
      }
    }
  }
}

/* Progressive filling of the collected flows, with the load of the flows
 * left out held fixed on the links they share (their `avail` is what those
 * leave).  Provisional rates go to f_next.  Everything here is on the dense
 * arrays: the flows of each link are a compressed list built from the
 * flows' hops, and the saturation heap has lazy keys (a link's level
 * (avail - load) / weight only rises as its flows freeze at or below it, so
 * a popped key that has risen is pushed again with its current value rather
 * than pushing on every change). */
static void fill(NetFlows *net) {
  Dense *d = &net->d;
  guint nf = net->comp_flows->len, nl = net->comp_links->len;
  for (guint i = 0; i <= nl; i++)
    d->l_start[i] = 0;
  for (guint i = 0; i < nl; i++) {
    d->l_weight[i] = 0;
    d->l_load[i] = 0;
    d->l_avail[i] = 0; /* the load of the collected flows, until below */
  }
  for (guint i = 0; i < nf; i++) {
    d->f_frozen[i] = 0;
    d->f_next[i] = INFINITY; /* stays so for a flow on no link */
    for (guint k = d->fh_start[i]; k < d->fh_start[i + 1]; k++) {
      guint c = d->fh_link[k];
      d->l_start[c + 1]++;
      d->l_weight[c] += d->fh_coef[k];
      d->l_avail[c] += d->fh_coef[k] * d->f_rate[i];
    }
  }
  for (guint i = 0; i < nl; i++) {
    d->l_start[i + 1] += d->l_start[i];
    d->l_put[i] = d->l_start[i];
  }
  if (d->l_start[nl] > d->ne_alloc) {
    d->ne_alloc = MAX(2 * d->ne_alloc, d->l_start[nl]);
    d->l_flow = g_renew(guint, d->l_flow, d->ne_alloc);
  }
  for (guint i = 0; i < nf; i++)
    for (guint k = d->fh_start[i]; k < d->fh_start[i + 1]; k++)
      d->l_flow[d->l_put[d->fh_link[k]]++] = i;
  for (guint i = 0; i < nl; i++) {
    double inside = d->l_avail[i];
    d->l_avail[i] = fmax(0, d->l_cap[i] - fmax(0, d->l_total[i] - inside));
  }
  /* Slack links stay out of the heap.  No flow can get more than
   * avail / coef on any of its links (ub, kept in f_next for now), so a link
   * whose flows' bounds sum below its avail never saturates: its flows all
   * freeze elsewhere.  Every flow keeps a link that is not slack (the one
   * that sets its bound).  On busy graphs most links are slack. */
  for (guint i = 0; i < nf; i++)
    for (guint k = d->fh_start[i]; k < d->fh_start[i + 1]; k++)
      if (d->fh_coef[k] > 0)
        d->f_next[i] = fmin(d->f_next[i], d->l_avail[d->fh_link[k]] / d->fh_coef[k]);
  for (guint i = 0; i < nf; i++)
    for (guint k = d->fh_start[i]; k < d->fh_start[i + 1]; k++)
      d->l_load[d->fh_link[k]] += d->fh_coef[k] * d->f_next[i];
  g_array_set_size(net->sat, 0);
  for (guint i = 0; i < nl; i++) {
    if (d->l_weight[i] > 0 && !(d->l_load[i] < d->l_avail[i] * (1 - 1e-9)))
      sat_push(net->sat, (Sat){d->l_avail[i] / d->l_weight[i], i});
    d->l_load[i] = 0;
  }
  for (guint i = 0; i < nf; i++)
    d->f_next[i] = INFINITY;
  /* Once every flow on a link is frozen the links left in the heap change
   * nothing that the re-solve reads (only their weights, which nothing
   * reads after): a re-solve's few flows often span hundreds of links, and
   * their last bottleneck comes early.  (A flow on no link is never
   * frozen: it keeps its infinite rate.) */
  guint unfrozen = 0;
  for (guint i = 0; i < nf; i++)
    unfrozen += d->fh_start[i + 1] > d->fh_start[i];
  while (net->sat->len > 0 && unfrozen > 0) {
    Sat s = sat_pop(net->sat);
    guint c = s.link;
    if (d->l_weight[c] <= 1e-12)
      continue; /* every flow on it froze elsewhere */
    double current = (d->l_avail[c] - d->l_load[c]) / d->l_weight[c];
    if (current > s.level) {
      sat_push(net->sat, (Sat){current, c});
      continue;
    }
    double level = s.level;
    for (guint k = d->l_start[c]; k < d->l_start[c + 1]; k++) {
      guint i = d->l_flow[k];
      if (d->f_frozen[i])
        continue;
      d->f_frozen[i] = 1;
      unfrozen--;
      d->f_next[i] = level;
      for (guint h = d->fh_start[i]; h < d->fh_start[i + 1]; h++) {
        d->l_load[d->fh_link[h]] += d->fh_coef[h] * level;
        d->l_weight[d->fh_link[h]] -= d->fh_coef[h];
      }
    }
    d->l_weight[c] = 0;
  }
}

/* Re-solves what the seeds touch.  The set grows until no link that it
 * fills is shared with a flow left out (such a flow might have to give way),
 * which makes the result the exact max-min allocation: every flow keeps a
 * tight link on which it has the largest rate.  Then commits: remaining
 * bytes are brought up to `now` at the old rates, and completion times are
 * renewed. */
static void solve(NetFlows *net, int64_t now) {
  Dense *d = &net->d;
  guint fi = 0, li = 0;
  d->nh = 0;
  /* seeds taken while held: their totals may have moved since */
  for (guint i = 0; i < net->comp_links->len; i++)
    d->l_total[i] = net->links[g_array_index(net->comp_links, guint, i)].total;
  for (;;) {
    collect(net, &fi, &li);
    fill(net);
    gboolean grew = FALSE;
    for (guint i = 0; i < net->comp_links->len; i++) {
      if (d->l_load[i] < d->l_avail[i] * (1 - 1e-7) || d->l_avail[i] >= d->l_cap[i] ||
          tight_bw(d->l_total[i], d->l_cap[i]))
        continue; /* it keeps room, or no one else is on it, or all its flows are in */
      Link *l = &net->links[g_array_index(net->comp_links, guint, i)];
      if (l->open == net->mark)
        continue;
      l->open = net->mark;
      for (guint k = 0; k < l->n; k++) {
        Flow *f = flow_at(net, l->e[k].flow);
        if (f->mark != net->mark) {
          f->mark = net->mark;
          g_array_append_val(net->comp_flows, l->e[k].flow);
          grew = TRUE;
        }
      }
    }
    if (!grew)
      break;
  }
  net->solves++;
  net->touched += net->comp_flows->len;
  for (guint i = 0; i < net->comp_flows->len; i++) {
    guint id = g_array_index(net->comp_flows, guint, i);
    Flow *f = flow_at(net, id);
    if (f->rate > 0 && now > f->since)
      f->remaining = fmax(0, f->remaining - f->rate * (double)(now - f->since) * 1e-9);
    f->since = now;
    if (!f->active)
      continue;
    if (isfinite(d->f_next[i]))
      for (guint k = d->fh_start[i]; k < d->fh_start[i + 1]; k++)
        d->l_total[d->fh_link[k]] += d->fh_coef[k] * (d->f_next[i] - f->rate);
    f->rate = d->f_next[i];
    f->version++;
    double secs = f->remaining / f->rate;
    int64_t t = now + (int64_t)ceil(fmin(secs, 1e9) * 1e9);
    done_push(net->done, (Done){t, f->seq, id, f->version});
  }
  for (guint i = 0; i < net->comp_links->len; i++)
    net->links[g_array_index(net->comp_links, guint, i)].total = d->l_total[i];
  g_array_set_size(net->comp_flows, 0);
  g_array_set_size(net->comp_links, 0);
  net->floor = INFINITY;
  /* Drop stale completion entries once they dominate the heap. */
  if (net->done->len > 4 * net->n_active + 1024) {
    GArray *keep = g_array_new(FALSE, FALSE, sizeof(Done));
    for (guint i = 0; i < net->done->len; i++) {
      Done dd = g_array_index(net->done, Done, i);
      Flow *f = flow_at(net, dd.flow);
      if (f->active && f->version == dd.version)
        done_push(keep, dd);
    }
    g_array_free(net->done, TRUE);
    net->done = keep;
  }
}

static void next_mark(NetFlows *net) {
  if (net->hold)
    return; /* one mark for everything gathered while held */
  if (++net->mark == 0) { /* wrapped: clear every mark */
    for (guint l = 0; l < net->n_links; l++)
      net->links[l].mark = 0;
    for (guint i = 0; i < net->flows->len; i++)
      flow_at(net, i)->mark = 0;
    net->mark = 1;
  }
}

guint net_flow_add(NetFlows *net, const TopoHop *hops, guint n_hops, double bytes, int64_t now) {
  guint id;
  if (net->free_ids->len) {
    id = g_array_index(net->free_ids, guint, net->free_ids->len - 1);
    g_array_set_size(net->free_ids, net->free_ids->len - 1);
  } else {
    id = net->flows->len;
    g_array_set_size(net->flows, id + 1);
  }
  Flow *f = flow_at(net, id);
  guint32 version = f->version; /* keeps old completion entries stale */
  gboolean queued = f->mark == net->mark && net->hold; /* ended and restarted while held */
  Hop *buf = f->hops;
  guint alloc = f->hops_alloc;
  memset(f, 0, sizeof *f);
  f->version = version + 1;
  if (alloc < n_hops) {
    g_free(buf);
    alloc = MAX(n_hops, 8);
    buf = g_new(Hop, alloc);
  }
  f->hops = buf;
  f->hops_alloc = alloc;
  /* merge repeated links: one entry per link, coefficients added */
  for (guint i = 0; i < n_hops; i++) {
    g_return_val_if_fail(hops[i].link < net->n_links, G_MAXUINT);
    guint h = net->slot[hops[i].link];
    if (h == G_MAXUINT) {
      h = net->slot[hops[i].link] = f->n_hops;
      f->hops[f->n_hops++] = (Hop){hops[i].link, 0, 0};
    }
    f->hops[h].coef += hops[i].coef;
  }
  for (guint h = 0; h < f->n_hops; h++)
    net->slot[f->hops[h].link] = G_MAXUINT;
  f->active = TRUE;
  f->remaining = fmax(bytes, 0);
  f->since = now;
  f->seq = net->seq++;
  net->n_active++;
  for (guint h = 0; h < f->n_hops; h++) {
    Link *l = &net->links[f->hops[h].link];
    if (!l->dirty) {
      l->dirty = TRUE;
      g_array_append_val(net->dirty, f->hops[h].link);
    }
    l->wsum += f->hops[h].coef;
    if (f->hops[h].coef > 0)
      net->floor = fmin(net->floor, l->cap / l->wsum);
    if (l->n == l->alloc) {
      l->alloc = MAX(4, 2 * l->alloc);
      l->e = g_renew(Entry, l->e, l->alloc);
    }
    f->hops[h].pos = l->n;
    l->e[l->n++] = (Entry){id, h};
  }
  next_mark(net);
  f->mark = net->mark;
  if (!queued)
    g_array_append_val(net->comp_flows, id);
  if (!net->hold)
    solve(net, now);
  return id;
}

/* Unlinks a flow; its links become seeds of the next re-solve. */
static void detach(NetFlows *net, guint id) {
  Flow *f = flow_at(net, id);
  net->floor = fmin(net->floor, f->rate);
  for (guint h = 0; h < f->n_hops; h++) {
    Link *l = &net->links[f->hops[h].link];
    /* the room it leaves on a tight link goes to the flows there */
    if (tight(l))
      l->open = net->mark;
    if (isfinite(f->rate))
      l->total = fmax(0, l->total - f->hops[h].coef * f->rate);
    l->wsum = l->n > 1 ? fmax(0, l->wsum - f->hops[h].coef) : 0;
    guint pos = f->hops[h].pos;
    Entry last = l->e[--l->n];
    if (pos < l->n) {
      l->e[pos] = last;
      flow_at(net, last.flow)->hops[last.hop].pos = pos;
    }
    if (l->mark != net->mark)
      take_link(net, f->hops[h].link);
  }
  f->active = FALSE;
  f->version++;
  net->n_active--;
  g_array_append_val(net->free_ids, id);
}

void net_flow_remove(NetFlows *net, guint id, int64_t now) {
  g_return_if_fail(id < net->flows->len && flow_at(net, id)->active);
  next_mark(net);
  detach(net, id);
  if (!net->hold)
    solve(net, now);
}

void net_flow_hold(NetFlows *net) {
  if (net->hold == 0)
    next_mark(net);
  net->hold++;
}

void net_flow_release(NetFlows *net, int64_t now) {
  g_return_if_fail(net->hold > 0);
  if (--net->hold == 0 && (net->comp_flows->len || net->comp_links->len))
    solve(net, now);
}

double net_flow_rate(const NetFlows *net, guint id) { return flow_at(net, id)->rate; }
guint net_flow_n_active(const NetFlows *net) { return net->n_active; }

int64_t net_flow_next(NetFlows *net) {
  while (net->done->len) {
    Done d = g_array_index(net->done, Done, 0);
    Flow *f = flow_at(net, d.flow);
    if (f->active && f->version == d.version)
      return d.time;
    done_pop(net->done);
  }
  return -1;
}

void net_flow_advance(NetFlows *net, int64_t now, GArray *finished) {
  next_mark(net);
  gboolean any = FALSE;
  for (int64_t t; (t = net_flow_next(net)) >= 0 && t <= now;) {
    Done d = g_array_index(net->done, Done, 0);
    done_pop(net->done);
    /* settle the flows that stay before their links change */
    detach(net, d.flow);
    g_array_append_val(finished, d.flow);
    any = TRUE;
  }
  if (any && !net->hold)
    solve(net, now);
}

void net_flow_stats(const NetFlows *net, guint64 *solves, guint64 *touched) {
  *solves = net->solves;
  *touched = net->touched;
}
