/* Test support: a budget of comparisons and reallocations; see budget.h. */
#include "budget.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include <cmocka.h>
#include <string.h>

int __real_strcmp(const char *a, const char *b);
int __real_strncmp(const char *a, const char *b, size_t n);
int __real_memcmp(const void *a, const void *b, size_t n);
size_t __real_strlen(const char *s);
void *__real_realloc(void *p, size_t n);
int __wrap_strcmp(const char *a, const char *b);
int __wrap_strncmp(const char *a, const char *b, size_t n);
int __wrap_memcmp(const void *a, const void *b, size_t n);
size_t __wrap_strlen(const char *s);
void *__wrap_realloc(void *p, size_t n);

static bool armed;
static struct budget_use limit, spent;

void budget_start(uint64_t compares, uint64_t reallocs) {
  limit.compares = compares;
  limit.reallocs = reallocs;
  memset(&spent, 0, sizeof(spent));
  armed = true;
}

void budget_stop(struct budget_use *used) {
  armed = false;
  if (used)
    *used = spent;
}

static void compared(void) {
  if (armed && ++spent.compares > limit.compares) {
    armed = false;
    fail_msg("more than %llu comparisons", (unsigned long long)limit.compares);
  }
}

int __wrap_strcmp(const char *a, const char *b) {
  compared();
  return __real_strcmp(a, b);
}

int __wrap_strncmp(const char *a, const char *b, size_t n) {
  compared();
  return __real_strncmp(a, b, n);
}

int __wrap_memcmp(const void *a, const void *b, size_t n) {
  compared();
  return __real_memcmp(a, b, n);
}

size_t __wrap_strlen(const char *s) {
  compared();
  return __real_strlen(s);
}

void *__wrap_realloc(void *p, size_t n) {
  if (armed && ++spent.reallocs > limit.reallocs) {
    armed = false;
    fail_msg("more than %llu reallocations", (unsigned long long)limit.reallocs);
  }
  return __real_realloc(p, n);
}
