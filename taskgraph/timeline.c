/* ptdsim — names of the streams and op categories shared by the PTD-P, ZeRO
 * and TeraPipe task graphs (see timeline.h). */
#include "timeline.h"

const char *sim_timeline_stream_name(guint kind) {
  static const char *const names[SIM_STREAM_KINDS] = {"compute", "tp", "pp-send", "pp-recv", "dp"};
  return kind < SIM_STREAM_KINDS ? names[kind] : "other";
}

const char *sim_timeline_category_name(guint category) {
  static const char *const names[] = {"compute", "tp", "pp", "pp", "dp", "optimizer", "cp"};
  return category < G_N_ELEMENTS(names) ? names[category] : "other";
}

const char *sim_timeline_category_label(guint category) {
  static const char *const names[] = {"compute", "tp all-reduce", "pp transfer", "pp all-gather",
                                      "dp all-reduce", "optimizer step", "cp ring hop"};
  return category < G_N_ELEMENTS(names) ? names[category] : "op";
}

void sim_timeline_piece(GArray *log, guint op, guint act, guint part, gint layer, guint layers, double seconds) {
  if (!log)
    return;
  SimTimelinePiece pc = {op, (guint8)act, (guint8)part, SIM_TIMELINE_PASS_OP, (guint16)layers, layer, seconds};
  g_array_append_val(log, pc);
}

const char *sim_timeline_part_name(guint part) {
  static const char *const names[SIM_N_PARTS] = {"",           "embedding",  "attention",  "MLP",
                                                 "residual",   "layernorm",  "logits and loss", "QKV and attention",
                                                 "projection", "MLP up",     "MLP down",   "layers"};
  return part < SIM_N_PARTS ? names[part] : "";
}

const SimTimelinePiece *sim_timeline_pieces(const SimTimeline *tl, guint op, guint *n) {
  *n = 0;
  if (!tl->pieces || tl->pieces->len == 0)
    return NULL;
  const SimTimelinePiece *pc = (const SimTimelinePiece *)(const void *)tl->pieces->data;
  guint lo = 0, hi = tl->pieces->len; /* the first piece with pc.op >= op */
  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    if (pc[mid].op < op)
      lo = mid + 1;
    else
      hi = mid;
  }
  guint end = lo;
  while (end < tl->pieces->len && pc[end].op == op)
    end++;
  *n = end - lo;
  return *n ? pc + lo : NULL;
}
