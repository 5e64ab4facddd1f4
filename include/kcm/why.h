/*
 * why — `kcm why KIND/NAME`: what a controller's object waits for, as the
 * controller's own planner sees it, from the user's kubeconfig and rights.
 *
 * It caches the kinds the object's controller reads (its row's kinds), in
 * the object's namespace only, with kcm's informers; once they are synced
 * it asks the row's why() and prints the answer. With --watch it answers
 * again at every change until the object waits for nothing more. It sends
 * no write.
 */
#ifndef KCM_WHY_H
#define KCM_WHY_H

/* Run the subcommand: argv[0] is "why". Returns the exit status: 0 when
 * answered (with --watch: when done), 1 when the object waits for good
 * (its progress deadline exceeded, with --watch), 2 for bad arguments or
 * settings, 3 when a read failed or the object does not exist. */
int kcm_why_main(int argc, char **argv);

#endif
