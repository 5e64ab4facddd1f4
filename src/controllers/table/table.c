/*
 * The controllers this build of kcm runs, in the order they start: each
 * one's row, from its own directory. Linked into the program itself, so
 * that another build (tests/third) lists others.
 */
#include "kcm/controllers.h"

extern const struct kcm_controllers_row kcm_deployment_row, kcm_replicaset_row;

const struct kcm_controllers_row *const kcm_controllers_table[] = {
    &kcm_deployment_row,
    &kcm_replicaset_row,
    NULL,
};
