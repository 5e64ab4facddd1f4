/*
 * pacer internals: what the module's own code and its tests share, and no
 * other module calls.
 */
#ifndef KCM_PACER_INTERNAL_H
#define KCM_PACER_INTERNAL_H

#include "kcm/pacer.h"

/* The interval now: interval_ms, or longer with many keys written lately. */
uint64_t kcm_pacer_interval(const struct kcm_pacer *p);

#endif
