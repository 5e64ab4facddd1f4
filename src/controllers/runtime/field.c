/*
 * controllers/runtime/field.c — finding out whether the API server keeps a
 * status field: a feature gate of kube-apiserver may drop it on writes
 * (as 1.34 does status.terminatingReplicas), an older release may not know
 * it. The answer comes from what the server does, not from its version.
 * See include/kcm/runtime.h.
 */
#include <string.h>

#include "kcm/json.h"
#include "kcm/log.h"
#include "kcm/runtime.h"

void kcm_runtime_field_init(struct kcm_runtime_field *f, const char *name) {
  memset(f, 0, sizeof(*f));
  f->name = name;
  f->kept = -1;
}

void kcm_runtime_field_seen(struct kcm_runtime_field *f, int64_t have) {
  if (f->kept < 0 && have >= 0) {
    f->kept = 1;
    kcm_v(2, "the API server keeps status.%s (a cached object has it)", f->name);
  }
}

bool kcm_runtime_field_ask(struct kcm_runtime_field *f) {
  if (f->kept >= 0 || f->asking)
    return false;
  f->asking = true;
  return true;
}

void kcm_runtime_field_answer(struct kcm_runtime_field *f, const char *body, size_t len,
                              const char *kind) {
  const char *const path[] = {"status", f->name, NULL};
  struct kcm_json j;

  f->asking = false;
  if (!body || f->kept >= 0)
    return;
  kcm_json_init(&j);
  kcm_json_start(&j, body, len);
  f->kept = kcm_json_find(&j, path) && kcm_json_peek(&j) == KCM_JSON_NUMBER;
  kcm_json_release(&j);
  kcm_info("status.%s of %ss: %s", f->name, kind,
           f->kept ? "the API server keeps it, and kcm writes it"
                   : "the API server drops it (its feature gate is off, or it does not know "
                     "the field), and kcm does not write it");
}
