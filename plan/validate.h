/* ptdsim — a request made a plan: the command line's values checked
 * against the cluster and one another (one-line errors saying what is wrong
 * and how to fix it), the MoE folding (moe.h) and the schedule's rules
 * applied. */
#pragma once

#include "plan.h"

/* Checks the request against the cluster and fills `plan`.  Every error is
 * one line saying what is wrong and how to fix it. */
gboolean sim_plan_build(const SimPlanRequest *req, const TopoCluster *cluster, SimPlan *plan, GError **error);
/* The profile a run prices its GEMMs with: `profile` itself, or a copy in
 * `scratch` whose sustained_clock_ratio is 1 (--clock burst: the boost
 * clock, whatever the cap) or the share the GPUs' board power cap allows
 * (--power-limit, else the cluster's gpu_power_limit_W:
 * model_power_clock_ratio).  NULL with a one-line error where a cap is
 * asked of a profile without a power model or outside the range it
 * models. */
const ModelProfile *sim_request_clock_profile(const SimPlanRequest *r, const TopoCluster *cluster,
                                              const ModelProfile *profile, ModelProfile *scratch, GError **error);
/* The schedule's need for --activation-limit (zb-auto's), given or not:
 * the one check and one-line error sim_plan_build makes, for a command
 * (plan) that must say it before its search runs. */
gboolean sim_plan_activation_limit_check(const SimScheduleInfo *row, gboolean limit_given, GError **error);
/* The option values the plan reads, each read by one parser, once, at
 * the command line's edge (search/options.c checks a value with it as it
 * is given, and search_config_request puts what it reads in the request): a --slow (links FALSE) or --slow-link (TRUE) list of
 * WHO=F entries into out[SIM_MAX_SLOW] (the indexes not yet checked
 * against a run); --stage-times F,B,W,COMM in ms; --gpu-speed
 * lognormal:SIGMA.  One-line errors naming the option and the rule. */
gboolean sim_slow_parse(const char *text, gboolean links, SimSlow *out, guint *n, GError **error);
gboolean sim_stage_times_parse(const char *text, double ms[4], GError **error);
gboolean sim_gpu_speed_parse(const char *text, double *sigma, GError **error);
/* --recompute-modules: Megatron-Core's module names, comma separated
 * (core_attn, mlp, layernorm, moe_act, mla_up_proj, moe, shared_experts),
 * or none, into MODEL_RC_* bits. */
gboolean sim_recompute_modules_parse(const char *text, guint *bits, GError **error);
/* --slices auto | uniform:N | L1,L2,... into the request's slices
 * (slices_given set; slices_text left as it is); sim_plan_build checks them
 * against the sequence and --granularity.  One-line errors. */
gboolean sim_slices_parse(const char *text, SimPlanRequest *r, GError **error);
/* The request's --slices as written, or as its values read ("auto",
 * "uniform:4", "512,384,..."); NULL where not given.  Free with g_free. */
char *sim_slices_text(const SimPlanRequest *r);
