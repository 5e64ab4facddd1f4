/*
 * controllers/table internals: what set.c and sharded.c share.
 */
#ifndef KCM_CONTROLLERS_INTERNAL_H
#define KCM_CONTROLLERS_INTERNAL_H

#include "kcm/controllers.h"

/* Every enabled controller o of the set s. */
#define EACH(s, o)                                                                             \
  for ((o) = (s)->one; (o) < (s)->one + (s)->rows; (o)++)                                \
    if ((o)->c)

#endif
