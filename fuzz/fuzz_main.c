/* ptdsim — one libFuzzer target (FUZZ_TARGET names it at build time; see
 * targets.h and tools/fuzz). */
#include <stddef.h>
#include <stdint.h>

#include "targets.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  fuzz_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_target_run((FuzzTarget)fuzz_target_find(FUZZ_TARGET), data, size);
  return 0;
}
