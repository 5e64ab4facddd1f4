/*
 * controllers/runtime/internal.h — what the runtime's files share.
 */
#ifndef KCM_RUNTIME_INTERNAL_H
#define KCM_RUNTIME_INTERNAL_H

#include "kcm/runtime.h"

/* stale.c: keep what j's writes to dependents got back, for the key's
 * next sync (at the end of each sync); free every record. */
void kcm_runtime_record_wrote(struct kcm_runtime *rt, struct kcm_runtime_job *j);
void kcm_runtime_forget_wrote(struct kcm_runtime *rt);

#endif
