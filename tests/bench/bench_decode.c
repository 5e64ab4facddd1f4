/*
 * bench_decode — how fast kcm turns API server JSON into cached pods.
 *
 * A recorded pod (tests/bench/data/pod.json: a running pod as an API
 * server serves it, managedFields included) is made into a list body of
 * 500 pods per page and a watch stream of MODIFIED events, each pod with
 * its own name and uid. Both are decoded as the informer decodes them (the
 * pull reader for the page and event envelopes, the framer for the stream,
 * kcm_api_decode_text() for each pod), and, for comparison, through a
 * json-c tree. Prints pods per CPU-second and the bytes each cached pod
 * holds, beside the budget. A recorded ReplicaSet (replicaset.json, beside
 * the pod) is decoded as many times, each with its own uid, the way a
 * status event is: in place with the template memo, and through json-c.
 *
 *   bench_decode [pods] [pod.json]      (default 100000 and the recording)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../src/informer/framing.h"
#include "../../src/api/internal.h"
#include "../oracle/tree.h"
#include "kcm/api.h"
#include "kcm/json.h"

#define PAGE 500
#define BUDGET_BYTES 1024

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The recorded pod with its name suffix and uid made unique by i. */
static void vary(char *pod, size_t len, long i) {
  char *name = strstr(pod, "-00000\""), *uid = strstr(pod, "\"uid\":\"");
  char digits[8];
  if (name) {
    snprintf(digits, sizeof(digits), "%05ld", i % 100000);
    memcpy(name + 1, digits, 5);
  }
  if (uid && uid + 7 + 36 < pod + len) {
    snprintf(digits, sizeof(digits), "%06lx", i & 0xffffff);
    memcpy(uid + 7 + 30, digits, 6);
  }
}

struct sink {
  struct kcm_intern *pool;
  struct kcm_json envelope, item;
  struct kcm_object **kept;
  long n, errors;
};

static void keep(struct sink *s, const char *text, size_t len) {
  struct kcm_object *o;
  struct kcm_api_error e;
  if (kcm_api_decode_text(KCM_KIND_POD, text, len, &s->item, NULL, s->pool, &o, &e)) {
    if (!s->errors++)
      fprintf(stderr, "bench_decode: %s %s\n", e.field, e.problem);
    return;
  }
  s->kept[s->n++] = o;
}

/* A list page: walk to items, decode each. */
static void decode_page(struct sink *s, const char *body, size_t len) {
  struct kcm_json *j = &s->envelope;
  kcm_json_start(j, body, len);
  kcm_json_object(j);
  while (kcm_json_member(j)) {
    const char *text;
    size_t n;
    if (!kcm_json_key_is(j, "items")) {
      kcm_json_skip(j);
      continue;
    }
    kcm_json_array(j);
    while (kcm_json_element(j) && kcm_json_raw(j, &text, &n))
      keep(s, text, n);
  }
  if (!kcm_json_done(j))
    s->errors++;
}

/* A watch event: find the object, decode it. */
static int on_event(const char *text, size_t len, const char *why, void *data) {
  struct sink *s = data;
  struct kcm_json *j = &s->envelope;
  const char *obj = NULL;
  size_t objlen = 0;
  if (!text) {
    s->errors++;
    return 0;
  }
  kcm_json_start(j, text, len);
  kcm_json_object(j);
  while (kcm_json_member(j))
    if (kcm_json_key_is(j, "object"))
      kcm_json_raw(j, &obj, &objlen);
    else
      kcm_json_skip(j);
  if (obj)
    keep(s, obj, objlen);
  return 0;
}

static void drop_all(struct sink *s) {
  long i;
  for (i = 0; i < s->n; i++)
    kcm_api_unref(s->kept[i], s->pool);
  s->n = 0;
}

/* ReplicaSet status events: `count` decodes of the recording (uid varied),
 * in place with a memo as the informer decodes them, then through json-c. */
static int replicasets(long count, struct kcm_intern *pool) {
  struct kcm_api_memo memo = {0};
  struct kcm_json j;
  struct kcm_object *o;
  struct kcm_api_error e;
  char *rs = malloc(1 << 20);
  size_t len = 0;
  double t0, t_text, t_tree;
  long i, errors = 0;
  FILE *f = fopen(KCM_BENCH_DATA "/replicaset.json", "rb");

  if (f) {
    len = rs ? fread(rs, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
  }
  if (!len) {
    fprintf(stderr, "bench_decode: cannot read %s/replicaset.json\n", KCM_BENCH_DATA);
    free(rs);
    return 1;
  }
  rs[len] = '\0';
  kcm_json_init(&j);
  t0 = cpu_now();
  for (i = 0; i < count; i++) {
    vary(rs, len, i);
    if (kcm_api_decode_text(KCM_KIND_REPLICASET, rs, len, &j, &memo, pool, &o, &e))
      errors++;
    else
      kcm_api_unref(o, pool);
  }
  t_text = cpu_now() - t0;
  t0 = cpu_now();
  for (i = 0; i < count; i++) {
    struct json_tokener *tok = json_tokener_new();
    struct json_object *doc;
    vary(rs, len, i);
    doc = json_tokener_parse_ex(tok, rs, (int)len);
    if (kcm_api_decode(KCM_KIND_REPLICASET, doc, pool, &o, &e))
      errors++;
    else
      kcm_api_unref(o, pool);
    json_object_put(doc);
    json_tokener_free(tok);
  }
  t_tree = cpu_now() - t0;
  printf("  ReplicaSets, in place:    %9.0f per CPU-second (%.2f us each, %zu bytes, "
         "status events with the template memo)\n",
         (double)count / t_text, t_text / (double)count * 1e6, len);
  printf("  ReplicaSets, json-c tree: %9.0f per CPU-second (%.2f us each)\n",
         (double)count / t_tree, t_tree / (double)count * 1e6);
  if (errors)
    fprintf(stderr, "bench_decode: %ld ReplicaSets failed to decode\n", errors);
  kcm_api_memo_release(&memo);
  kcm_json_release(&j);
  free(rs);
  return errors ? 1 : 0;
}

int main(int argc, char **argv) {
  long pods = argc > 1 ? atol(argv[1]) : 100000, i, pages;
  const char *path = argc > 2 ? argv[2] : KCM_BENCH_DATA "/pod.json";
  struct kcm_intern pool;
  struct sink s = {0};
  struct kcm_framer fr;
  struct kcm_buf list = KCM_BUF_INIT(SIZE_MAX), stream = KCM_BUF_INIT(SIZE_MAX);
  char *pod;
  size_t pod_len, bytes = 0, sizes = 0;
  double t0, t_list, t_watch, t_tree;
  FILE *f;

  if (pods < PAGE || !(f = fopen(path, "rb"))) {
    fprintf(stderr, "usage: bench_decode [pods >= %d] [pod.json]\n", PAGE);
    return 2;
  }
  pod = malloc(1 << 20);
  pod_len = pod ? fread(pod, 1, (1 << 20) - 1, f) : 0;
  fclose(f);
  if (!pod_len) {
    fprintf(stderr, "bench_decode: cannot read %s\n", path);
    return 1;
  }
  pod[pod_len] = '\0';
  pages = pods / PAGE;
  pods = pages * PAGE;

  /* One page of 500 pods, and a stream of 500 events. */
  kcm_buf_append_str(&list, "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{"
                            "\"resourceVersion\":\"100\"},\"items\":[");
  for (i = 0; i < PAGE; i++) {
    vary(pod, pod_len, i);
    if (i)
      kcm_buf_append(&list, ",", 1);
    kcm_buf_append(&list, pod, pod_len);
    kcm_buf_appendf(&stream, "{\"type\":\"MODIFIED\",\"object\":%s}\n", pod);
  }
  kcm_buf_append_str(&list, "]}");

  kcm_intern_init(&pool);
  s.pool = &pool;
  s.kept = calloc((size_t)pods, sizeof(*s.kept));
  kcm_json_init(&s.envelope);
  kcm_json_init(&s.item);
  kcm_framer_init(&fr, 16u << 20, on_event, &s);

  /* List pages, keeping every pod as the cache does. */
  t0 = cpu_now();
  for (i = 0; i < pages; i++)
    decode_page(&s, list.data, list.len);
  t_list = cpu_now() - t0;
  for (i = 0; i < s.n; i++)
    sizes += kcm_api_size(s.kept[i]);
  bytes = sizes / (size_t)(s.n ? s.n : 1);
  drop_all(&s);

  /* Watch events, fed in 16 KiB chunks as they come off the socket. */
  t0 = cpu_now();
  for (i = 0; i < pages; i++) {
    size_t off;
    for (off = 0; off < stream.len; off += 16384)
      kcm_framer_feed(&fr, stream.data + off,
                      stream.len - off < 16384 ? stream.len - off : 16384);
    drop_all(&s);
  }
  t_watch = cpu_now() - t0;

  /* The same pods through a json-c tree, as kcm decoded before. */
  t0 = cpu_now();
  for (i = 0; i < pages; i++) {
    struct json_tokener *tok = json_tokener_new();
    struct json_object *doc = json_tokener_parse_ex(tok, list.data, (int)list.len), *items;
    size_t k;
    json_object_object_get_ex(doc, "items", &items);
    for (k = 0; k < json_object_array_length(items); k++) {
      struct kcm_object *o;
      struct kcm_api_error e;
      if (!kcm_api_decode(KCM_KIND_POD, json_object_array_get_idx(items, k), &pool, &o, &e))
        kcm_api_unref(o, &pool);
    }
    json_object_put(doc);
    json_tokener_free(tok);
  }
  t_tree = cpu_now() - t0;

  printf("bench_decode: %ld pods of %zu bytes of JSON each (%s)\n", pods, pod_len, path);
  printf("  list pages, in place:     %9.0f pods per CPU-second (%.2f us per pod, %.0f MB/s)\n",
         (double)pods / t_list, t_list / (double)pods * 1e6,
         (double)list.len * (double)pages / t_list / 1e6);
  printf("  watch events, in place:   %9.0f pods per CPU-second (%.2f us per pod)\n",
         (double)pods / t_watch, t_watch / (double)pods * 1e6);
  printf("  list pages, json-c tree:  %9.0f pods per CPU-second (%.2f us per pod)\n",
         (double)pods / t_tree, t_tree / (double)pods * 1e6);
  printf("  cache bytes per pod:      %9zu bytes (budget %d)  %s\n", bytes, BUDGET_BYTES,
         bytes <= BUDGET_BYTES ? "within budget" : "OVER BUDGET");
  printf("  decode errors:            %9ld\n", s.errors);
  if (replicasets(pods, &pool))
    s.errors++;
  kcm_framer_release(&fr);
  kcm_json_release(&s.envelope);
  kcm_json_release(&s.item);
  kcm_intern_release(&pool);
  kcm_buf_release(&list);
  kcm_buf_release(&stream);
  free(s.kept);
  free(pod);
  return s.errors ? 1 : 0;
}
