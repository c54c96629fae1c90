/* ptdsim — max-min fair flow network (see flow.h). */
#include "flow.h"

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
  gboolean frozen;
  double next_rate; /* provisional, during a re-solve */
} Flow;

typedef struct {
  guint flow, hop; /* the flow and the index of this link in its hops */
} Entry;

typedef struct {
  double cap;
  Entry *e;
  guint n, alloc;
  guint32 mark;
  double total;  /* committed load of every flow on it, bytes/s */
  guint32 open;  /* == the net's mark: its flows join the re-solve */
  /* progressive filling state */
  double load, weight, avail;
  guint32 version;
} Link;

typedef struct {
  int64_t time;
  guint64 seq;
  guint flow;
  guint32 version;
} Done;

typedef struct {
  double level;
  guint link;
  guint32 version;
} Sat;

struct _SimFlowNet {
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
  guint64 solves, touched;
  guint hold; /* > 0: re-solves wait for sim_flow_release */
  guint *slot;       /* per link: its index in the flow being added, or G_MAXUINT */
};

/* --- two small binary heaps --- */

static gboolean done_before(const Done *a, const Done *b) {
  return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

static void done_push(GArray *h, Done d) {
  g_array_append_val(h, d);
  Done *a = (Done *)(void *)h->data;
  guint i = h->len - 1;
  while (i > 0) {
    guint p = (i - 1) / 2;
    if (!done_before(&d, &a[p]))
      break;
    a[i] = a[p];
    i = p;
  }
  a[i] = d;
}

static void done_pop(GArray *h) {
  Done *a = (Done *)(void *)h->data;
  Done last = a[h->len - 1];
  g_array_set_size(h, h->len - 1);
  guint n = h->len, i = 0;
  if (n == 0)
    return;
  for (;;) {
    guint c = 2 * i + 1;
    if (c >= n)
      break;
    if (c + 1 < n && done_before(&a[c + 1], &a[c]))
      c++;
    if (!done_before(&a[c], &last))
      break;
    a[i] = a[c];
    i = c;
  }
  a[i] = last;
}

static gboolean sat_before(const Sat *a, const Sat *b) {
  return a->level < b->level || (a->level == b->level && a->link < b->link);
}

static void sat_push(GArray *h, Sat s) {
  g_array_append_val(h, s);
  Sat *a = (Sat *)(void *)h->data;
  guint i = h->len - 1;
  while (i > 0) {
    guint p = (i - 1) / 2;
    if (!sat_before(&s, &a[p]))
      break;
    a[i] = a[p];
    i = p;
  }
  a[i] = s;
}

static Sat sat_pop(GArray *h) {
  Sat *a = (Sat *)(void *)h->data;
  Sat top = a[0], last = a[h->len - 1];
  g_array_set_size(h, h->len - 1);
  guint n = h->len, i = 0;
  if (n == 0)
    return top;
  for (;;) {
    guint c = 2 * i + 1;
    if (c >= n)
      break;
    if (c + 1 < n && sat_before(&a[c + 1], &a[c]))
      c++;
    if (!sat_before(&a[c], &last))
      break;
    a[i] = a[c];
    i = c;
  }
  a[i] = last;
  return top;
}

/* --- the net --- */

SimFlowNet *sim_flow_net_new(guint n_links, const double *capacity) {
  SimFlowNet *net = g_new0(SimFlowNet, 1);
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
  return net;
}

void sim_flow_net_free(SimFlowNet *net) {
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
  g_free(net);
}

static Flow *flow_at(const SimFlowNet *net, guint id) { return &g_array_index(net->flows, Flow, id); }

/* A link is tight when its flows fill it: only through tight links can a
 * change reach other flows (a flow is never limited by a link with room to
 * spare).  The tolerance absorbs rounding in the running totals. */
static gboolean tight(const Link *l) { return l->total >= l->cap * (1 - 1e-7); }

/* Grows the set of flows and links to re-solve from the marked seeds in
 * comp_flows / comp_links: a flow brings its links; a link brings its flows
 * only when it is tight or opened (breadth-first; *fi and *li carry on
 * where the last call stopped). */
static void collect(SimFlowNet *net, guint *fi, guint *li) {
  while (*fi < net->comp_flows->len || *li < net->comp_links->len) {
    for (; *fi < net->comp_flows->len; (*fi)++) {
      Flow *f = flow_at(net, g_array_index(net->comp_flows, guint, *fi));
      for (guint h = 0; h < f->n_hops; h++) {
        Link *l = &net->links[f->hops[h].link];
        if (l->mark != net->mark) {
          l->mark = net->mark;
          g_array_append_val(net->comp_links, f->hops[h].link);
        }
      }
    }
    for (; *li < net->comp_links->len; (*li)++) {
      Link *l = &net->links[g_array_index(net->comp_links, guint, *li)];
      if (l->open != net->mark && !tight(l))
        continue;
      for (guint k = 0; k < l->n; k++) {
        Flow *f = flow_at(net, l->e[k].flow);
        if (f->mark != net->mark) {
          f->mark = net->mark;
          g_array_append_val(net->comp_flows, l->e[k].flow);
        }
      }
    }
  }
}

/* Progressive filling of the collected flows, with the load of the flows
 * left out held fixed on the links they share (their `avail` is what those
 * leave).  Provisional rates go to next_rate. */
static void fill(SimFlowNet *net) {
  for (guint i = 0; i < net->comp_flows->len; i++) {
    Flow *f = flow_at(net, g_array_index(net->comp_flows, guint, i));
    f->frozen = FALSE;
    f->next_rate = INFINITY; /* stays so for a flow on no link */
  }
  g_array_set_size(net->sat, 0);
  for (guint i = 0; i < net->comp_links->len; i++) {
    guint id = g_array_index(net->comp_links, guint, i);
    Link *l = &net->links[id];
    double inside = 0;
    l->load = 0;
    l->weight = 0;
    for (guint k = 0; k < l->n; k++) {
      Flow *f = flow_at(net, l->e[k].flow);
      if (f->mark != net->mark)
        continue;
      double c = f->hops[l->e[k].hop].coef;
      l->weight += c;
      inside += c * f->rate;
    }
    l->avail = fmax(0, l->cap - fmax(0, l->total - inside));
    l->version++;
    if (l->weight > 0)
      sat_push(net->sat, (Sat){l->avail / l->weight, id, l->version});
  }
  while (net->sat->len > 0) {
    Sat s = sat_pop(net->sat);
    Link *l = &net->links[s.link];
    if (s.version != l->version)
      continue; /* stale */
    double level = s.level;
    for (guint k = 0; k < l->n; k++) {
      Flow *f = flow_at(net, l->e[k].flow);
      if (f->frozen || f->mark != net->mark)
        continue;
      f->frozen = TRUE;
      f->next_rate = level;
      for (guint h = 0; h < f->n_hops; h++) {
        Link *m = &net->links[f->hops[h].link];
        m->load += f->hops[h].coef * level;
        m->weight -= f->hops[h].coef;
        m->version++;
        if (m != l && m->weight > 1e-12)
          sat_push(net->sat, (Sat){fmax(level, (m->avail - m->load) / m->weight), f->hops[h].link, m->version});
      }
    }
  }
}

/* Re-solves what the seeds touch.  The set grows until no link that it
 * fills is shared with a flow left out (such a flow might have to give way),
 * which makes the result the exact max-min allocation: every flow keeps a
 * tight link on which it has the largest rate.  Then commits: remaining
 * bytes are brought up to `now` at the old rates, and completion times are
 * renewed. */
static void solve(SimFlowNet *net, int64_t now) {
  guint fi = 0, li = 0;
  for (;;) {
    collect(net, &fi, &li);
    fill(net);
    gboolean grew = FALSE;
    for (guint i = 0; i < net->comp_links->len; i++) {
      Link *l = &net->links[g_array_index(net->comp_links, guint, i)];
      if (l->open == net->mark || tight(l) || l->load < l->avail * (1 - 1e-7) || l->avail >= l->cap)
        continue; /* all its flows are in, or it keeps room, or no one else is on it */
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
    if (isfinite(f->next_rate))
      for (guint h = 0; h < f->n_hops; h++)
        net->links[f->hops[h].link].total += f->hops[h].coef * (f->next_rate - f->rate);
    f->rate = f->next_rate;
    f->version++;
    double secs = f->remaining / f->rate;
    int64_t t = now + (int64_t)ceil(fmin(secs, 1e9) * 1e9);
    done_push(net->done, (Done){t, f->seq, id, f->version});
  }
  g_array_set_size(net->comp_flows, 0);
  g_array_set_size(net->comp_links, 0);
  /* Drop stale completion entries once they dominate the heap. */
  if (net->done->len > 4 * net->n_active + 1024) {
    GArray *keep = g_array_new(FALSE, FALSE, sizeof(Done));
    for (guint i = 0; i < net->done->len; i++) {
      Done d = g_array_index(net->done, Done, i);
      Flow *f = flow_at(net, d.flow);
      if (f->active && f->version == d.version)
        done_push(keep, d);
    }
    g_array_free(net->done, TRUE);
    net->done = keep;
  }
}

static void next_mark(SimFlowNet *net) {
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

guint sim_flow_add(SimFlowNet *net, const TopoHop *hops, guint n_hops, double bytes, int64_t now) {
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
    if (l->n == l->alloc) {
      l->alloc = MAX(4, 2 * l->alloc);
      l->e = g_renew(Entry, l->e, l->alloc);
    }
    f->hops[h].pos = l->n;
    l->e[l->n++] = (Entry){id, h};
  }
  next_mark(net);
  f->mark = net->mark;
  g_array_append_val(net->comp_flows, id);
  if (!net->hold)
    solve(net, now);
  return id;
}

/* Unlinks a flow; its links become seeds of the next re-solve. */
static void detach(SimFlowNet *net, guint id) {
  Flow *f = flow_at(net, id);
  for (guint h = 0; h < f->n_hops; h++) {
    Link *l = &net->links[f->hops[h].link];
    /* the room it leaves on a tight link goes to the flows there */
    if (tight(l))
      l->open = net->mark;
    if (isfinite(f->rate))
      l->total = fmax(0, l->total - f->hops[h].coef * f->rate);
    guint pos = f->hops[h].pos;
    Entry last = l->e[--l->n];
    if (pos < l->n) {
      l->e[pos] = last;
      flow_at(net, last.flow)->hops[last.hop].pos = pos;
    }
    if (l->mark != net->mark) {
      l->mark = net->mark;
      g_array_append_val(net->comp_links, f->hops[h].link);
    }
  }
  f->active = FALSE;
  f->version++;
  net->n_active--;
  g_array_append_val(net->free_ids, id);
}

void sim_flow_remove(SimFlowNet *net, guint id, int64_t now) {
  g_return_if_fail(id < net->flows->len && flow_at(net, id)->active);
  next_mark(net);
  detach(net, id);
  if (!net->hold)
    solve(net, now);
}

void sim_flow_hold(SimFlowNet *net) {
  if (net->hold == 0)
    next_mark(net);
  net->hold++;
}

void sim_flow_release(SimFlowNet *net, int64_t now) {
  g_return_if_fail(net->hold > 0);
  if (--net->hold == 0 && (net->comp_flows->len || net->comp_links->len))
    solve(net, now);
}

double sim_flow_rate(const SimFlowNet *net, guint id) { return flow_at(net, id)->rate; }
guint sim_flow_n_active(const SimFlowNet *net) { return net->n_active; }

int64_t sim_flow_next(SimFlowNet *net) {
  while (net->done->len) {
    Done d = g_array_index(net->done, Done, 0);
    Flow *f = flow_at(net, d.flow);
    if (f->active && f->version == d.version)
      return d.time;
    done_pop(net->done);
  }
  return -1;
}

void sim_flow_advance(SimFlowNet *net, int64_t now, GArray *finished) {
  next_mark(net);
  gboolean any = FALSE;
  for (int64_t t; (t = sim_flow_next(net)) >= 0 && t <= now;) {
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

void sim_flow_stats(const SimFlowNet *net, guint64 *solves, guint64 *touched) {
  *solves = net->solves;
  *touched = net->touched;
}
