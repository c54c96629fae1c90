/* ptdsim — reports of a simulated configuration: the --format json contract
 * of SPEC.md and a short human-readable text. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "../sim/plan.h"

cJSON *trace_result_json(const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                         const SimResult *r);
void trace_result_text(GString *out, const SimPlan *plan, const ModelProfile *profile, const TopoCluster *cluster,
                       const SimResult *r);
