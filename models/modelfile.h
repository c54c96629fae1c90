/* ptdsim — a model's shape read from a file: ptdsim's own model JSON (the
 * keys `ptdsim run --format json` writes under "config", or that whole
 * output) or a Hugging Face config.json of the Llama, Qwen3 (dense and
 * MoE), Mixtral and DeepSeek-V3 families, mapped field by field onto
 * ModelShape.  A field that would change the shape in a way ptdsim does not
 * model (sliding windows, another activation, an unknown family) is refused
 * in one line naming the file and the key, never dropped. */
#pragma once

#include <cjson/cJSON.h>
#include <glib.h>

#include "transformer.h"

/* Reads the model file at `path` (a regular file of at most
 * PTD_JSON_MAX_BYTES, one JSON object) into `out`.  Errors
 * (PTD_DATA_ERROR) are one line naming the file. */
gboolean model_file_read(const char *path, ModelShape *out, GError **error);
/* The same from a parsed object; `file` names it in errors. */
gboolean model_file_from_json(const cJSON *root, const char *file, ModelShape *out, GError **error);
