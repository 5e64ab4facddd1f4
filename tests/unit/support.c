/* Test support; see support.h. */
#include "support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t sim_pid;
static char sim_dir[300];
static char tmp_dir[256];

const char *support_tmpdir(void) { return tmp_dir; }

int support_start_sim(const char *const *extra) {
  const char *argv[32];
  int fds[2], n = 0;
  pid_t parent;
  char line[256] = {0};
  FILE *out;

  snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/kcm-test-XXXXXX");
  if (!mkdtemp(tmp_dir))
    return -1;
  snprintf(sim_dir, sizeof(sim_dir), "%s/sim", tmp_dir);
  argv[n++] = "python3";
  argv[n++] = KCM_TEST_SIM;
  argv[n++] = "--dir";
  argv[n++] = sim_dir;
  while (extra && *extra && n < 30)
    argv[n++] = *extra++;
  argv[n] = NULL;
  if (pipe(fds))
    return -1;
  parent = getpid();
  sim_pid = fork();
  if (sim_pid < 0)
    return -1;
  if (sim_pid == 0) {
    /* A test that crashes must not leave its server running. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
      _exit(127);
    dup2(fds[1], 1);
    close(fds[0]);
    execvp("python3", (char *const *)(uintptr_t)argv);
    _exit(127);
  }
  close(fds[1]);
  out = fdopen(fds[0], "r");
  if (!fgets(line, sizeof(line), out) || strncmp(line, "READY ", 6) != 0) {
    fprintf(stderr, "the local API server did not start: %s\n", line);
    fclose(out);
    return -1;
  }
  fclose(out);
  return 0;
}

void support_stop_sim(void) {
  char cmd[300];
  int status;
  if (sim_pid > 0) {
    kill(sim_pid, SIGTERM);
    waitpid(sim_pid, &status, 0);
    sim_pid = 0;
  }
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp_dir);
  if (system(cmd) != 0)
    fprintf(stderr, "could not remove %s\n", tmp_dir);
}

const char *support_sim_file(const char *name) {
  static char path[400];
  snprintf(path, sizeof(path), "%s/%s", sim_dir, name);
  return path;
}

void support_result_free(struct support_result *r) {
  free(r->body);
  memset(r, 0, sizeof(*r));
}

static void on_done(const struct kcm_client_response *resp, void *data) {
  struct support_result *r = data;
  r->done = true;
  r->err = resp->err;
  r->status = resp->status;
  r->retry_after = resp->retry_after;
  r->body = strdup(resp->body);
  snprintf(r->message, sizeof(r->message), "%s", resp->message);
}

void support_request(uv_loop_t *loop, struct kcm_client *c, const char *method,
                     const char *path, const char *body, struct support_result *r) {
  struct kcm_client_request_options o = {0};
  support_result_free(r);
  o.method = method;
  o.path = path;
  o.body = body;
  o.body_len = body ? strlen(body) : 0;
  if (!strcmp(method, "PATCH"))
    o.content_type = "application/merge-patch+json";
  o.timeout_ms = 600000; /* bulk loads of many pods take a while */
  o.done = on_done;
  o.data = r;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  support_wait(loop, &r->done);
}

static void on_tick(uv_timer_t *t) { (void)t; }

bool support_run_until(uv_loop_t *loop, bool (*cond)(void *arg), void *arg,
                       uint64_t timeout_ms) {
  uv_timer_t tick;
  uint64_t deadline;
  bool ok;
  uv_update_time(loop);
  deadline = uv_now(loop) + timeout_ms;
  uv_timer_init(loop, &tick);
  uv_timer_start(&tick, on_tick, 20, 20);
  while (!(ok = cond(arg)) && uv_now(loop) < deadline)
    uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&tick, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return ok;
}

void support_run_once(uv_loop_t *loop) {
  uv_timer_t tick;
  uv_timer_init(loop, &tick);
  uv_timer_start(&tick, on_tick, 20, 0);
  uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&tick, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
}

static bool flag_set(void *arg) { return *(const bool *)arg; }

void support_wait(uv_loop_t *loop, const bool *flag) {
  support_run_until(loop, flag_set, (void *)(uintptr_t)flag, 24 * 3600 * 1000ull);
}

void support_connect(uv_loop_t *loop, struct kcm_client_config *cfg, struct kcm_client **c,
                     const char *prefix, char *ns, size_t ns_len) {
  static int counter;
  struct kcm_client_config_options co = {support_sim_file("kubeconfig"), NULL, NULL};
  struct support_result r = {0};
  char *err = NULL, body[192];

  if (kcm_client_config_load(cfg, &co, &err) != 0)
    fail_msg("kubeconfig: %s", err ? err : "?");
  uv_loop_init(loop);
  if (kcm_client_new(c, loop, cfg) != 0)
    fail_msg("cannot create a client");
  snprintf(ns, ns_len, "%s-%d-%d", prefix, (int)getpid(), ++counter);
  snprintf(body, sizeof(body), "{\"metadata\":{\"name\":\"%s\"}}", ns);
  support_request(loop, *c, "POST", "/api/v1/namespaces", body, &r);
  if (r.err)
    fail_msg("cannot create namespace %s: %s", ns, r.body ? r.body : r.message);
  support_result_free(&r);
}

void support_faults(uv_loop_t *loop, struct kcm_client *c, const char *json) {
  struct support_result r = {0};
  support_request(loop, c, "POST", "/_sim/faults", json, &r);
  if (r.err)
    fail_msg("fault injection refused: %s", r.body ? r.body : r.message);
  support_result_free(&r);
}
