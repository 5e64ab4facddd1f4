/*
 * options internals: what the module's own code and its tests share, and no
 * other module calls.
 */
#ifndef KCM_OPTIONS_INTERNAL_H
#define KCM_OPTIONS_INTERNAL_H

#include "kcm/options.h"

/* The feature gates given that have no effect on kcm (all but
 * WatchListClient), comma-separated into buf; "" when none. */
const char *kcm_options_inert_gates(const struct kcm_options *o, char *buf, size_t len);

#endif
