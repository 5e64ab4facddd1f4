/*
 * bench_cache — what caching pods costs kcm: the local API server is
 * loaded with N running pods (as a real cluster serves them, managedFields
 * included), one informer lists and watches them, and the benchmark prints
 * the heap bytes held per cached pod, the time to sync and the decode rate.
 *
 *   bench_cache [pods]          (default 10000)
 */
#include <malloc.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcm/informer.h"
#include "support.h"

#define BUDGET_BYTES 1024

static size_t heap_in_use(void) {
  struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

static long rss_kib(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
      resident = 0;
    fclose(f);
  }
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static bool synced(void *arg) { return kcm_informer_synced(arg); }

/* CPU seconds this process has used (user + system). */
static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
  long pods = argc > 1 ? atol(argv[1]) : 10000;
  struct kcm_client_config_options co = {NULL, NULL, NULL};
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_intern pool;
  struct kcm_informer inf;
  struct kcm_informer_options io = {0};
  struct support_result r = {0};
  uv_loop_t loop;
  char *err = NULL, body[256];
  size_t heap_before, heap_after;
  long rss_before, rss_after;
  uint64_t t0, t1;
  double per_pod, cpu0, cpu1;

  if (pods < 1) {
    fprintf(stderr, "usage: bench_cache [pods]\n");
    return 2;
  }
  if (support_start_sim(NULL))
    return 1;
  co.kubeconfig = support_sim_file("kubeconfig");
  if (kcm_client_config_load(&cfg, &co, &err)) {
    fprintf(stderr, "bench_cache: %s\n", err);
    return 1;
  }
  uv_loop_init(&loop);
  kcm_client_new(&client, &loop, &cfg);
  kcm_client_set_rate_limit(client, 0, 1);
  snprintf(body, sizeof(body), "{\"pods\":%ld,\"namespaces\":10,\"nodes\":100}", pods);
  support_request(&loop, client, "POST", "/_sim/bulk", body, &r);
  if (r.err) {
    fprintf(stderr, "bench_cache: loading pods failed: %s\n", r.body ? r.body : r.message);
    return 1;
  }
  support_result_free(&r);

  kcm_intern_init(&pool);
  io.kind = KCM_KIND_POD;
  kcm_informer_init(&inf, &loop, client, &pool, &io);
  malloc_trim(0);
  heap_before = heap_in_use();
  rss_before = rss_kib();
  uv_update_time(&loop);
  t0 = uv_now(&loop);
  cpu0 = cpu_seconds();
  kcm_informer_start(&inf);
  if (!support_run_until(&loop, synced, &inf, 600000)) {
    fprintf(stderr, "bench_cache: the cache did not sync\n");
    return 1;
  }
  t1 = uv_now(&loop);
  cpu1 = cpu_seconds();
  malloc_trim(0);
  heap_after = heap_in_use();
  rss_after = rss_kib();
  per_pod = (double)(heap_after - heap_before) / (double)pods;

  printf("bench_cache: %ld pods cached (%zu in the informer)\n", pods, kcm_informer_len(&inf));
  printf("  time to sync:            %8.3f s (list of %ld pods, %llu pages; includes the "
         "local API server's time)\n",
         (double)(t1 - t0) / 1000.0, pods, (unsigned long long)inf.stats.lists);
  printf("  kcm's CPU for the sync:  %8.3f s (%.0f pods per CPU-second decoded and cached)\n",
         cpu1 - cpu0, (double)pods / (cpu1 - cpu0 > 0 ? cpu1 - cpu0 : 1e-9));
  printf("  heap held per pod:       %8.0f bytes   (budget %d)  %s\n", per_pod, BUDGET_BYTES,
         per_pod <= BUDGET_BYTES ? "within budget" : "OVER BUDGET");
  printf("  string pool:             %8zu strings, %zu bytes\n", kcm_intern_count(&pool),
         pool.bytes);
  printf("  RSS growth per pod:      %8.0f bytes\n",
         (double)(rss_after - rss_before) * 1024.0 / (double)pods);
  printf("  decode errors:           %8llu\n", (unsigned long long)inf.stats.decode_errors);
  support_stop_sim();
  return 0;
}
