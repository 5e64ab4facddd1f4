/*
 * satoken internals: what the module's own code and its tests share, and no
 * other module calls.
 */
#ifndef KCM_SATOKEN_INTERNAL_H
#define KCM_SATOKEN_INTERNAL_H

#include "kcm/satoken.h"

/* When to replace a token that lives life_s seconds: after 80% of it, at
 * least 1 s from now (pure). */
uint64_t kcm_satoken_refresh_ms(int64_t life_s);

#endif
