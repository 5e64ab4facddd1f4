/*
 * The table of a test build of kcm with a third controller, touch
 * (tests/third/touch): kcm's own rows, and its.
 */
#include "kcm/controllers.h"

extern const struct kcm_controllers_row kcm_deployment_row, kcm_replicaset_row, kcm_touch_row;

const struct kcm_controllers_row *const kcm_controllers_table[] = {
    &kcm_deployment_row,
    &kcm_replicaset_row,
    &kcm_touch_row,
    NULL,
};
