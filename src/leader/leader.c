/* leader — leader election on a Lease; see include/kcm/leader.h. */
#include "kcm/json.h"
#include "kcm/leader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/jsonw.h"
#include "kcm/log.h"
#include "kcm/metrics.h"

#define JITTER 1.2 /* client-go's JitterFactor */

/* --- the record ------------------------------------------------------------------------------ */

static bool same_record(const struct kcm_lease_record *a, const struct kcm_lease_record *b) {
  return a->exists == b->exists && !strcmp(a->holder, b->holder) &&
         a->duration_s == b->duration_s && !strcmp(a->acquire, b->acquire) &&
         !strcmp(a->renew, b->renew) && a->transitions == b->transitions;
}

static void fill(struct kcm_lease_record *r, const char *holder, int32_t duration_s,
                 const char *acquire, const char *renew, int32_t transitions) {
  memset(r, 0, sizeof(*r));
  r->exists = true;
  snprintf(r->holder, sizeof(r->holder), "%s", holder);
  r->duration_s = duration_s;
  snprintf(r->acquire, sizeof(r->acquire), "%s", acquire);
  snprintf(r->renew, sizeof(r->renew), "%s", renew);
  r->transitions = transitions;
}

enum kcm_leader_step kcm_leader_decide(const struct kcm_lease_record *cur, const char *identity,
                                       int32_t duration_s, uint64_t observed_ms,
                                       uint64_t now_ms, const char *now,
                                       struct kcm_lease_record *next) {
  bool mine;
  if (!cur->exists) {
    fill(next, identity, duration_s, now, now, 0);
    return KCM_LEADER_CREATE;
  }
  mine = !strcmp(cur->holder, identity);
  if (cur->holder[0] && !mine &&
      observed_ms + (uint64_t)(cur->duration_s > 0 ? cur->duration_s : 0) * 1000 > now_ms)
    return KCM_LEADER_WAIT;
  fill(next, identity, duration_s, mine ? cur->acquire : now, now,
       mine ? cur->transitions : cur->transitions + 1);
  return KCM_LEADER_UPDATE;
}

void kcm_leader_release_record(const struct kcm_lease_record *cur, const char *now,
                               struct kcm_lease_record *out) {
  fill(out, "", 1, now, now, cur->transitions);
}

static const char *get_str(struct json_object *o, const char *key) {
  struct json_object *v;
  return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
             ? json_object_get_string(v)
             : "";
}

static int32_t get_int(struct json_object *o, const char *key) {
  struct json_object *v;
  return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int)
             ? json_object_get_int(v)
             : 0;
}

int kcm_leader_parse(struct json_object *lease, struct kcm_lease_record *out) {
  struct json_object *spec = NULL;
  if (!json_object_is_type(lease, json_type_object))
    return KCM_EINVAL;
  if (!json_object_object_get_ex(lease, "spec", &spec) ||
      !json_object_is_type(spec, json_type_object))
    spec = NULL;
  memset(out, 0, sizeof(*out));
  out->exists = true;
  if (!spec)
    return 0;
  fill(out, get_str(spec, "holderIdentity"), get_int(spec, "leaseDurationSeconds"),
       get_str(spec, "acquireTime"), get_str(spec, "renewTime"),
       get_int(spec, "leaseTransitions"));
  return 0;
}

int kcm_leader_each_listed(const char *body, size_t len,
                           void (*each)(const char *name, const struct kcm_lease_record *r,
                                        void *data),
                           void *data) {
  struct json_object *doc = kcm_json_tree(body, len), *items, *meta, *name;
  size_t i, n;
  if (!doc || !json_object_object_get_ex(doc, "items", &items) ||
      !json_object_is_type(items, json_type_array)) {
    json_object_put(doc);
    return KCM_EINVAL;
  }
  n = json_object_array_length(items);
  for (i = 0; i < n; i++) {
    struct json_object *it = json_object_array_get_idx(items, i);
    struct kcm_lease_record r;
    if (json_object_object_get_ex(it, "metadata", &meta) &&
        json_object_object_get_ex(meta, "name", &name) &&
        json_object_is_type(name, json_type_string) && !kcm_leader_parse(it, &r))
      each(json_object_get_string(name), &r, data);
  }
  json_object_put(doc);
  return 0;
}

void kcm_leader_apply(const struct kcm_lease_record *r, const char *lease, size_t len,
                      struct kcm_jsonw *w) {
  struct kcm_buf spec = KCM_BUF_INIT(4096);
  struct kcm_jsonw s;
  int err;
  kcm_jsonw_start(&s, &spec);
  kcm_jsonw_object(&s);
  kcm_jsonw_key_string(&s, "holderIdentity", r->holder);
  kcm_jsonw_key_int(&s, "leaseDurationSeconds", r->duration_s);
  kcm_jsonw_key_string(&s, "acquireTime", r->acquire);
  kcm_jsonw_key_string(&s, "renewTime", r->renew);
  kcm_jsonw_key_int(&s, "leaseTransitions", r->transitions);
  kcm_jsonw_end(&s);
  if ((err = kcm_jsonw_finish(&s)) == 0)
    kcm_jsonw_copy_set_json(w, lease, len, (const char *const[]){"spec", NULL}, spec.data);
  else if (!w->err)
    w->err = err;
  kcm_buf_release(&spec);
}

void kcm_leader_now(char *buf, size_t len) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
}

/* --- the elector ----------------------------------------------------------------------------- */

int kcm_leader_check(const struct kcm_leader_options *o, const char **err) {
  if (!o->ns || !*o->ns || !o->name || !*o->name)
    *err = "the lease namespace and name must not be empty";
  else if (strlen(o->ns) > 63 || strlen(o->name) > 253)
    *err = "the lease namespace must be at most 63 characters and its name at most 253";
  else if (kcm_client_segment_problem(o->ns) || kcm_client_segment_problem(o->name))
    *err = "the lease namespace and name may not be '.' or '..' nor contain '/' or '%'";
  else if (!o->lease_ms || !o->renew_ms || !o->retry_ms)
    *err = "the lease duration, renew deadline and retry period must be greater than zero";
  else if (o->lease_ms <= o->renew_ms)
    *err = "the lease duration must be greater than the renew deadline";
  else if ((double)o->renew_ms <= JITTER * (double)o->retry_ms)
    *err = "the renew deadline must be greater than 1.2 times the retry period";
  else
    return 0;
  return KCM_EINVAL;
}

static void random_bytes(void *buf, size_t n) {
  if (getrandom(buf, n, 0) != (ssize_t)n) {
    /* Not expected on Linux; fall back to the clock so identities still differ. */
    struct timespec ts;
    uint8_t *p = buf;
    size_t i;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    for (i = 0; i < n; i++)
      p[i] = (uint8_t)((uint64_t)ts.tv_nsec >> (i % 8 * 8)) ^ (uint8_t)getpid();
  }
}

static void make_identity(char *buf, size_t len) {
  uint8_t u[16];
  char host[256] = "";
  if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
    snprintf(host, sizeof(host), "kcm");
  random_bytes(u, sizeof(u));
  u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
  u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
  snprintf(buf, len,
           "%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", host,
           u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
           u[13], u[14], u[15]);
}

int kcm_leader_init(struct kcm_leader *l, uv_loop_t *loop, struct kcm_client *client,
                    const struct kcm_leader_options *o) {
  const char *why;
  if (kcm_leader_check(o, &why))
    return KCM_EINVAL;
  memset(l, 0, sizeof(*l));
  l->loop = loop;
  l->client = client;
  snprintf(l->ns, sizeof(l->ns), "%s", o->ns);
  snprintf(l->name, sizeof(l->name), "%s", o->name);
  if (o->identity)
    snprintf(l->identity, sizeof(l->identity), "%s", o->identity);
  else
    make_identity(l->identity, sizeof(l->identity));
  l->lease_ms = o->lease_ms;
  l->renew_ms = o->renew_ms;
  l->retry_ms = o->retry_ms;
  l->limiter = o->limiter;
  uv_timer_init(loop, &l->timer);
  l->timer.data = l;
  return 0;
}

static void attempt(struct kcm_leader *l);
static void do_release(struct kcm_leader *l);

static void on_timer(uv_timer_t *t) { attempt(t->data); }

static void schedule(struct kcm_leader *l) {
  uint64_t wait = l->retry_ms;
  if (l->stopping)
    return;
  if (!l->leading) {
    uint32_t r;
    random_bytes(&r, sizeof(r));
    wait += (uint64_t)(JITTER * (double)l->retry_ms * ((double)r / 4294967296.0));
  }
  uv_timer_start(&l->timer, on_timer, wait, 0);
}

/* Send method to the Lease (named) or its collection; with a record, the
 * Lease kept with its spec set to it is the body. */
static int send_lease(struct kcm_leader *l, const char *method, bool named,
                      const struct kcm_lease_record *record, kcm_client_done_cb done) {
  struct kcm_client_request_options o = {0};
  char path[KCM_CLIENT_PATH_MAX];
  struct kcm_buf body = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  struct kcm_jsonw w;
  int err;
  if ((err = kcm_client_path(path, sizeof(path), "/apis/coordination.k8s.io/v1", l->ns, "leases",
                             named ? l->name : NULL, NULL)))
    return err;
  if (record && l->lease) {
    kcm_jsonw_start(&w, &body);
    kcm_leader_apply(record, l->lease, strlen(l->lease), &w);
    if ((err = kcm_jsonw_finish(&w))) {
      kcm_buf_release(&body);
      return err;
    }
  }
  o.method = method;
  o.path = path;
  o.body = body.len ? body.data : NULL;
  o.body_len = body.len;
  o.timeout_ms = (long)l->renew_ms;
  o.done = done;
  o.data = l;
  o.limiter = l->limiter;
  if ((err = kcm_client_request(l->client, &o, NULL)) == 0)
    l->busy = true;
  kcm_buf_release(&body);
  return err;
}

/* Keep the Lease the server answered with. */
static int take_answer(struct kcm_leader *l, const struct kcm_client_response *resp) {
  struct json_object *o = kcm_json_tree(resp->body, strlen(resp->body));
  struct kcm_lease_record r;
  char *text;
  if (!o || kcm_leader_parse(o, &r)) {
    json_object_put(o);
    return KCM_EINVAL;
  }
  json_object_put(o);
  if (!(text = strdup(resp->body)))
    return KCM_ENOMEM;
  free(l->lease);
  l->lease = text;
  if (!same_record(&r, &l->observed)) {
    l->observed = r;
    l->observed_at = uv_now(l->loop);
  }
  return 0;
}

static void succeeded(struct kcm_leader *l) {
  l->renewed_at = uv_now(l->loop);
  if (!l->leading) {
    l->leading = true;
    l->transitions++;
    kcm_info("successfully acquired lease lease=\"%s/%s\" identity=\"%s\"", l->ns, l->name,
             l->identity);
    if (l->on_started)
      l->on_started(l);
  }
  schedule(l);
}

static void failed(struct kcm_leader *l, const char *why) {
  uint64_t now = uv_now(l->loop);
  free(l->lease); /* read it again next time */
  l->lease = NULL;
  if (l->leading && now >= l->renewed_at + l->retry_ms + l->renew_ms) {
    l->leading = false;
    kcm_error("failed to renew lease lease=\"%s/%s\" err=\"%s\"", l->ns, l->name, why);
    if (l->on_lost)
      l->on_lost(l);
    return;
  }
  if (l->leading)
    kcm_v(2, "lease renewal failed; retrying lease=\"%s/%s\" err=\"%s\"", l->ns, l->name, why);
  schedule(l);
}

/* A request ended; true when the elector is stopping and handled it. */
static bool finished(struct kcm_leader *l) {
  l->busy = false;
  if (!l->stopping)
    return false;
  do_release(l);
  return true;
}

static void on_written(const struct kcm_client_response *resp, void *data) {
  struct kcm_leader *l = data;
  if (resp->err == KCM_ECANCELED) {
    l->busy = false;
    return;
  }
  if (!resp->err && take_answer(l, resp) == 0) {
    if (finished(l))
      return;
    succeeded(l);
    return;
  }
  if (finished(l))
    return;
  failed(l, resp->err ? resp->message : "malformed Lease in the answer");
}

/* The Lease to create, without its spec, as the one kept. */
static int new_lease(struct kcm_leader *l) {
  struct kcm_buf b = KCM_BUF_INIT(4096);
  struct kcm_jsonw w;
  int err;
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "apiVersion", "coordination.k8s.io/v1");
  kcm_jsonw_key_string(&w, "kind", "Lease");
  kcm_jsonw_key_object(&w, "metadata");
  kcm_jsonw_key_string(&w, "name", l->name);
  kcm_jsonw_key_string(&w, "namespace", l->ns);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  if ((err = kcm_jsonw_finish(&w))) {
    kcm_buf_release(&b);
    return err;
  }
  free(l->lease);
  l->lease = kcm_buf_take(&b);
  return l->lease ? 0 : KCM_ENOMEM;
}

static void write_record(struct kcm_leader *l, const struct kcm_lease_record *next, bool create) {
  int err;
  if (create && (err = new_lease(l))) {
    failed(l, kcm_strerror(err));
    return;
  }
  if ((err = send_lease(l, create ? "POST" : "PUT", !create, next, on_written)))
    failed(l, kcm_strerror(err));
}

static void on_read(const struct kcm_client_response *resp, void *data) {
  struct kcm_leader *l = data;
  struct kcm_lease_record next, absent = {0};
  char now[40];
  if (resp->err == KCM_ECANCELED) {
    l->busy = false;
    return;
  }
  if (finished(l))
    return;
  kcm_leader_now(now, sizeof(now));
  if (resp->err == KCM_ENOTFOUND) {
    kcm_leader_decide(&absent, l->identity, (int32_t)(l->lease_ms / 1000), 0, 0, now, &next);
    write_record(l, &next, true);
    return;
  }
  if (resp->err || take_answer(l, resp)) {
    failed(l, resp->err ? resp->message : "malformed Lease");
    return;
  }
  switch (kcm_leader_decide(&l->observed, l->identity, (int32_t)(l->lease_ms / 1000),
                            l->observed_at, uv_now(l->loop), now, &next)) {
  case KCM_LEADER_WAIT:
    kcm_v(4, "lease is held by another and has not yet expired lease=\"%s/%s\" holder=\"%s\"",
          l->ns, l->name, l->observed.holder);
    failed(l, "held by another");
    break;
  case KCM_LEADER_CREATE:
  case KCM_LEADER_UPDATE:
    write_record(l, &next, false);
    break;
  }
}

static void attempt(struct kcm_leader *l) {
  int err;
  if (l->busy || l->stopping)
    return;
  if (l->leading && l->lease) {
    /* Fast path: renew from the Lease we last wrote. */
    struct kcm_lease_record next;
    char now[40];
    kcm_leader_now(now, sizeof(now));
    kcm_leader_decide(&l->observed, l->identity, (int32_t)(l->lease_ms / 1000),
                      l->observed_at, uv_now(l->loop), now, &next);
    write_record(l, &next, false);
    return;
  }
  if ((err = send_lease(l, "GET", true, NULL, on_read)))
    failed(l, kcm_strerror(err));
}

void kcm_leader_start(struct kcm_leader *l) {
  l->stopping = false;
  kcm_info("attempting to acquire lease lease=\"%s/%s\" identity=\"%s\"", l->ns, l->name,
           l->identity);
  attempt(l);
}

static void on_released(const struct kcm_client_response *resp, void *data) {
  struct kcm_leader *l = data;
  l->busy = false;
  l->leading = false;
  if (resp->err)
    kcm_error("could not release lease lease=\"%s/%s\" err=\"%s\"", l->ns, l->name,
              resp->message);
  else
    kcm_info("released lease lease=\"%s/%s\"", l->ns, l->name);
  if (l->on_released)
    l->on_released(l);
}

static void do_release(struct kcm_leader *l) {
  struct kcm_lease_record r;
  char now[40];
  /* Held, or taken by a write answered after the release was asked for. */
  if (l->lease && !strcmp(l->observed.holder, l->identity)) {
    kcm_leader_now(now, sizeof(now));
    kcm_leader_release_record(&l->observed, now, &r);
    if (send_lease(l, "PUT", true, &r, on_released) == 0)
      return;
  }
  l->leading = false;
  if (l->on_released)
    l->on_released(l);
}

void kcm_leader_release(struct kcm_leader *l) {
  if (l->stopping)
    return;
  l->stopping = true;
  uv_timer_stop(&l->timer);
  if (!l->busy)
    do_release(l);
}

bool kcm_leader_healthy(const struct kcm_leader *l, uint64_t now_ms, uint64_t tolerance_ms) {
  return !l->leading || now_ms <= l->renewed_at + l->lease_ms + tolerance_ms;
}

void kcm_leader_close(struct kcm_leader *l) {
  if (l->closed)
    return;
  l->closed = true;
  uv_timer_stop(&l->timer);
  uv_close((uv_handle_t *)&l->timer, NULL);
  free(l->lease);
  l->lease = NULL;
}

int kcm_leader_metrics(const struct kcm_leader *l, struct kcm_buf *out) {
  const char *lease[] = {"name", l ? l->name : "kcm", NULL};
  char labels[600];
  int err;
  if ((err = kcm_metrics_labels(labels, sizeof(labels), lease)) ||
      (err = kcm_metrics_family(
           out, "leader_election_master_status", "gauge",
           "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
           "backup, 1 indicates master. 'name' is the string used to identify the lease. "
           "Please make sure to group by name.")))
    return err;
  return kcm_metrics_sample(out, "leader_election_master_status", labels, l ? l->leading : 1);
}
