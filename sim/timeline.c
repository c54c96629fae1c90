/* ptdsim — names of the streams and op categories shared by the PTD-P and
 * TeraPipe task graphs (see timeline.h). */
#include "timeline.h"

const char *sim_timeline_stream_name(guint kind) {
  static const char *const names[SIM_TIMELINE_STREAM_KINDS] = {"compute", "tp", "pp-send", "pp-recv", "dp"};
  return kind < SIM_TIMELINE_STREAM_KINDS ? names[kind] : "other";
}

const char *sim_timeline_category_name(guint category) {
  static const char *const names[] = {"compute", "tp", "pp", "pp", "dp", "optimizer"};
  return category < G_N_ELEMENTS(names) ? names[category] : "other";
}

const char *sim_timeline_category_label(guint category) {
  static const char *const names[] = {"compute", "tp all-reduce", "pp transfer", "pp all-gather",
                                      "dp all-reduce", "optimizer step"};
  return category < G_N_ELEMENTS(names) ? names[category] : "op";
}
