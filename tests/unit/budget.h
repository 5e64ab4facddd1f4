/*
 * Test support: a budget of comparisons and reallocations. The test binary
 * is linked with --wrap for strcmp, strncmp, memcmp, strlen and realloc, so
 * every call the code under test makes to them is counted. A test arms a
 * budget before the call it measures; the first call past it fails the test
 * at once, so work that grows faster than the input fails quickly and by
 * count, never by timing.
 */
#ifndef KCM_TEST_BUDGET_H
#define KCM_TEST_BUDGET_H

#include <stdint.h>

struct budget_use {
  uint64_t compares; /* strcmp, strncmp, memcmp and strlen calls */
  uint64_t reallocs;
};

/* Count from zero; fail the running test past either limit. */
void budget_start(uint64_t compares, uint64_t reallocs);
/* Stop counting; *used (may be NULL) receives what was spent. */
void budget_stop(struct budget_use *used);

#endif
