/* ptdsim models — the built-in model shapes: what each is, how many
 * parameters it has, and where its numbers come from. */
#include "cli.h"

#include <stdio.h>

#include "../models/transformer.h"
#include "../traces/report.h"

static cJSON *model_json(const char *name, const ModelShape *m) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", name);
  trace_shape_json(o, m);
  cJSON_AddStringToObject(o, "source", model_source(name));
  return o;
}

int cli_models(int argc, char **argv) {
  char *format = NULL;
  GOptionEntry entries[] = {{"format", 0, 0, G_OPTION_ARG_STRING, &format, "text (default) or json", "FORMAT"},
                            {NULL, 0, 0, 0, NULL, NULL, NULL}};
  CliArgs args;
  cli_args_init(&args, "- the built-in models (--model NAME of run, plan and sweep)");
  cli_args_add(&args, entries);
  GError *error = NULL;
  CliFormat fmt = CLI_TEXT;
  int code = 0;
  if (!cli_args_parse(&args, &argc, &argv, &error) || !cli_format(format, &fmt, &error))
    goto fail;
  if (argc > 1) {
    g_set_error(&error, SIM_PLAN_ERROR, SIM_PLAN_ERROR_INVALID, "models takes no arguments, but got '%s'", argv[1]);
    goto fail;
  }
  if (fmt == CLI_JSON) {
    cJSON *list = cJSON_CreateArray();
    for (const char *const *n = model_names(); *n; n++) {
      ModelShape m;
      model_lookup(*n, &m);
      cJSON_AddItemToArray(list, model_json(*n, &m));
    }
    cli_print_json(list);
    cJSON_Delete(list);
    goto done;
  }
  printf("%-15s %6s %6s %5s %4s %6s %-7s %-9s %5s %6s %8s %8s %-13s  %s\n", "name", "layers", "hidden", "heads", "kv",
         "ffn", "mlp", "norm", "seq", "vocab", "params", "active", "experts", "source");
  for (const char *const *n = model_names(); *n; n++) {
    ModelShape m;
    model_lookup(*n, &m);
    char experts[32] = "-";
    if (model_is_moe(&m))
      g_snprintf(experts, sizeof experts, "%u/%u x %u%s", m.topk, m.experts, model_moe_ffn(&m),
                 m.shared_ffn ? "+s" : "");
    char kv[8];
    g_snprintf(kv, sizeof kv, "%u", model_groups(&m));
    printf("%-15s %6u %6u %5u %4s %6u %-7s %-9s %5u %6u %7.2fB %7.2fB %-13s  %s\n", *n, m.layers, m.hidden, m.heads,
           model_is_mla(&m) ? "mla" : kv, model_ffn(&m), m.mlp == MODEL_MLP_SWIGLU ? "swiglu" : "gelu",
           m.norm == MODEL_NORM_RMSNORM ? "rmsnorm" : "layernorm", m.seq_len, m.vocab,
           (double)model_param_count(&m) / 1e9, (double)model_active_param_count(&m) / 1e9, experts,
           model_source(*n));
  }
  printf("\nkv: key/value heads (fewer than the heads: grouped-query attention). Llama models also use rotary\n"
         "positions, untied logits and no linear biases; GPT and Megatron models learned positions, tied logits\n"
         "and biases. Any shape option of run (--layers, --ffn-hidden, --num-query-groups, ...) overrides a\n"
         "model's value.  active: the parameters one token passes through (k of E routed experts per MoE\n"
         "layer).  experts: k/E x expert width, +s with shared experts; kv mla: multi-head latent attention.\n"
         "deepseek-v3's params include its multi-token-prediction module (the checkpoint also stores a copy of\n"
         "the embedding and head with it).\n");
  goto done;
fail:
  code = cli_fail(error);
done:
  g_free(format);
  cli_args_clear(&args);
  return code;
}
