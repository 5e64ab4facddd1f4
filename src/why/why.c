/*
 * why — the `kcm why` subcommand; see include/kcm/why.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <locale.h>
#include <unistd.h>
#include <uv.h>
#include <wchar.h>

#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/controllers.h"
#include "kcm/error.h"
#include "kcm/informer.h"
#include "kcm/intern.h"
#include "kcm/log.h"
#include "kcm/options.h"
#include "kcm/why.h"

enum { WHY_OK = 0, WHY_FAILED = 1, WHY_USAGE = 2, WHY_READ = 3 };

#define CHECK_MS 20             /* how often the caches are looked at */
#define ANSWER_MAX (16u << 20) /* bytes of one answer */
#define TEXTS 16               /* objects an answer may read whole */
#define PATH_MAX_BYTES 1024    /* of an object's URL path */

/* An object an answer asked to read whole (a held pod's status). */
struct why_text {
  struct kcm_why *w;
  uint8_t kind;                        /* enum kcm_kind */
  char name[KCM_API_NAME_MAX + 1];     /* "": a free slot */
  enum { TEXT_WANTED, TEXT_READING, TEXT_READ, TEXT_FAILED } state;
  bool stale;                          /* changed while being read */
  char *body;                          /* owned, when read */
  size_t len;
  unsigned asked;                      /* the last answer that asked for it */
  struct kcm_client_request *req;      /* while reading */
};

struct kcm_why {
  /* from the command line */
  const char *target;     /* KIND/NAME */
  const char *ns;         /* -n; NULL: the context's */
  const char *kubeconfig;
  const char *context;
  bool json;
  bool watch;
  uint64_t timeout_ms;    /* --request-timeout: for the caches to sync */
  /* resolved */
  const struct kcm_controllers_row *row;
  char name[KCM_API_NAME_MAX + 1];
  struct kcm_client_config cfg;
  uv_loop_t loop;
  struct kcm_client *client;
  struct kcm_intern pool;
  struct kcm_informer informers[KCM_KIND_COUNT];
  unsigned kinds;         /* those set up */
  uv_timer_t check;
  uint64_t started;
  bool changed;           /* since the last answer */
  bool loop_up, finishing;
  char *last;             /* the last answer printed (--watch) */
  bool tty;               /* stdout is a terminal: --watch redraws the answer in place */
  unsigned rows;          /* terminal rows the last answer took (tty) */
  int open;               /* informers still to close */
  int rc;
  struct why_text texts[TEXTS];
  unsigned told;          /* 1 << kind: a failed read of that kind said */
  unsigned refused;       /* 1 << kind: reads of that kind refused; not asked again */
  unsigned answers;       /* answers worked out so far */
  int reading;            /* texts being read */
};

static const char usage[] =
    "Usage: kcm why KIND/NAME [-n NAMESPACE] [-o text|json] [--watch]\n"
    "               [--kubeconfig FILE] [--context NAME] [--request-timeout DURATION]\n"
    "\n"
    "What a Deployment's rollout waits for, as kcm's own planner sees it: the next\n"
    "step the controller takes and the condition it waits for, the pods that hold it\n"
    "back, the progress deadline. KIND is deployment (deploy) or replicaset (rs).\n"
    "Reads only, with the kubeconfig's user and rights (also as `kubectl kcm why`).\n"
    "\n"
    "  -n, --namespace NS     the object's namespace (default: the context's)\n"
    "  -o, --output FORMAT    text (default) or json\n"
    "  -w, --watch            answer again at each change until the rollout is done\n"
    "                         (exit 0) or past its progress deadline (exit 1): on a\n"
    "                         terminal in place, else a line per change\n"
    "      --kubeconfig FILE  default: $KUBECONFIG, ~/.kube/config, in-cluster\n"
    "      --context NAME     default: the current context\n"
    "      --request-timeout D  give up reading after D (default 30s)\n"
    "\n"
    "Exit status: 0 answered, 1 past its progress deadline (--watch), 2 bad\n"
    "arguments or settings, 3 a read failed or the object does not exist.\n";

/* Whether suffix[0..n) names kind k's API group as kubectl takes it after
 * the kind: "apps" or "v1.apps". */
static bool group_named(const struct kcm_api_kind *k, const char *suffix, size_t n) {
  size_t v = strlen(k->version);
  if (n == strlen(k->group) && !strncmp(suffix, k->group, n))
    return *k->group != '\0';
  return n > v + 1 && !strncmp(suffix, k->version, v) && suffix[v] == '.' &&
         n - v - 1 == strlen(k->group) && !strncmp(suffix + v + 1, k->group, n - v - 1);
}

/* The row whose kind `word` names (kubectl's names: singular, plural or
 * short, and the group after a dot, as `kubectl get -o name` writes
 * them), among those that can answer; NULL if none. */
static const struct kcm_controllers_row *row_named(const char *word, size_t n) {
  const char *dot = memchr(word, '.', n);
  size_t base = dot ? (size_t)(dot - word) : n, i;
  for (i = 0; kcm_controllers_table[i]; i++) {
    const struct kcm_controllers_row *r = kcm_controllers_table[i];
    const struct kcm_api_kind *k = kcm_api_kind(r->kind);
    const char *names[] = {k->singular, k->plural, k->short_name, k->name};
    size_t j;
    if (!r->why || (dot && !group_named(k, dot + 1, n - base - 1)))
      continue;
    for (j = 0; j < sizeof(names) / sizeof(names[0]); j++)
      if (names[j] && strlen(names[j]) == base && !strncasecmp(names[j], word, base))
        return r;
  }
  return NULL;
}

/* A flag's value: "--flag=v", or the next argument. */
static const char *value(int argc, char **argv, int *i, const char *a, size_t n) {
  if (a[n] == '=')
    return a + n + 1;
  if (a[n] || *i + 1 >= argc)
    return NULL;
  return argv[++*i];
}

static bool is(const char *a, const char *shrt, const char *lng, size_t *n) {
  size_t l = strlen(lng);
  if (shrt && !strncmp(a, shrt, 2) && (a[2] == '\0' || a[2] == '=')) {
    *n = 2;
    return true;
  }
  if (!strncmp(a, lng, l) && (a[l] == '\0' || a[l] == '=')) {
    *n = l;
    return true;
  }
  return false;
}

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "kcm why: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n(see kcm why --help)\n");
  return WHY_USAGE;
}

/* One flag at argv[*i]: 0, or the exit status of a bad one. */
static int flag(struct kcm_why *w, int argc, char **argv, int *i) {
  const char *a = argv[*i], *v;
  size_t n;
  if (is(a, "-n", "--namespace", &n)) {
    if (!(w->ns = value(argc, argv, i, a, n)) || !*w->ns)
      return bad("%s needs a namespace", a);
  } else if (is(a, "-o", "--output", &n)) {
    if (!(v = value(argc, argv, i, a, n)) || (strcmp(v, "json") && strcmp(v, "text")))
      return bad("%s takes text or json", a);
    w->json = !strcmp(v, "json");
  } else if (is(a, "-w", "--watch", &n) && !a[n]) {
    w->watch = true;
  } else if (is(a, NULL, "--kubeconfig", &n)) {
    if (!(w->kubeconfig = value(argc, argv, i, a, n)))
      return bad("%s needs a file", a);
  } else if (is(a, NULL, "--context", &n)) {
    if (!(w->context = value(argc, argv, i, a, n)))
      return bad("%s needs a name", a);
  } else if (is(a, NULL, "--request-timeout", &n)) {
    if (!(v = value(argc, argv, i, a, n)) || kcm_options_duration(v, &w->timeout_ms) ||
        !w->timeout_ms)
      return bad("%s needs a duration above 0, such as 30s", a);
  } else
    return bad("unknown flag %s", a);
  return 0;
}

/* The command line into w: 0, or the exit status to leave with (-1 for
 * --help, printed). */
static int parse(struct kcm_why *w, int argc, char **argv) {
  const char *slash;
  int i, rc;
  w->timeout_ms = 30000;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      fputs(usage, stdout);
      return -1;
    }
    if (a[0] == '-' && a[1]) {
      if ((rc = flag(w, argc, argv, &i)))
        return rc;
    } else if (w->target)
      return bad("one object at a time: %s, then %s", w->target, a);
    else
      w->target = a;
  }
  if (!w->target)
    return bad("%s", "name the object: KIND/NAME, e.g. deployment/web");
  if (!(slash = strchr(w->target, '/')) || !slash[1] || strchr(slash + 1, '/'))
    return bad("%s is not KIND/NAME", w->target);
  if (!(w->row = row_named(w->target, (size_t)(slash - w->target))))
    return bad("kcm cannot explain a %.*s: deployment and replicaset are what it knows",
               (int)(slash - w->target),
               w->target);
  if (strlen(slash + 1) > KCM_API_NAME_MAX || kcm_client_segment_problem(slash + 1))
    return bad("%s is not an object's name", slash + 1);
  strcpy(w->name, slash + 1);
  return 0;
}

/* The settings, the client, and a cache of each kind the row reads in the
 * object's namespace. 0, or the exit status. */
static int setup(struct kcm_why *w) {
  struct kcm_client_config_options copts = {w->kubeconfig, w->context, NULL};
  char *errmsg = NULL;
  int err, k;

  if ((err = kcm_client_config_load(&w->cfg, &copts, &errmsg))) {
    fprintf(stderr, "kcm why: cannot load the settings: %s\n",
            errmsg ? errmsg : kcm_strerror(err));
    free(errmsg);
    return WHY_USAGE;
  }
  if (!w->ns)
    w->ns = w->cfg.namespace ? w->cfg.namespace : "default";
  if (kcm_client_segment_problem(w->ns))
    return bad("%s is not a namespace", w->ns);
  uv_loop_init(&w->loop);
  kcm_intern_init(&w->pool);
  w->loop_up = true;
  if ((err = kcm_client_new(&w->client, &w->loop, &w->cfg))) {
    fprintf(stderr, "kcm why: cannot set up the API client for %s: %s\n", w->cfg.server,
            kcm_strerror(err));
    return WHY_USAGE;
  }
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    struct kcm_informer_options io = {0};
    if (!(w->row->kinds & (1u << k)))
      continue;
    io.kind = (enum kcm_kind)k;
    io.namespace = w->ns;
    io.protobuf = true;
    if ((err = kcm_informer_init(&w->informers[k], &w->loop, w->client, &w->pool, &io))) {
      fprintf(stderr, "kcm why: cannot read %s: %s\n", kcm_api_kind(io.kind)->plural,
              kcm_strerror(err));
      return WHY_USAGE;
    }
    w->informers[k].data = w;
    w->kinds |= 1u << k;
  }
  return 0;
}

static void closed(struct kcm_informer *inf) {
  struct kcm_why *w = inf->data;
  if (--w->open == 0)
    kcm_client_close(w->client);
}

/* Stop reading; the loop then runs out of handles. */
static void finish(struct kcm_why *w, int rc) {
  int k;
  if (w->finishing)
    return;
  w->finishing = true;
  w->rc = rc;
  uv_timer_stop(&w->check);
  uv_close((uv_handle_t *)&w->check, NULL);
  for (k = 0; k < TEXTS; k++)
    if (w->texts[k].req)
      kcm_client_cancel(w->texts[k].req);
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (w->kinds & (1u << k))
      w->open++;
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (w->kinds & (1u << k))
      kcm_informer_stop(&w->informers[k], closed);
}

/* A cache that cannot sync: the read the server refused, and its answer. */
static bool read_failed(struct kcm_why *w) {
  struct kcm_buf said = KCM_BUF_INIT(1024);
  int k;
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    const struct kcm_informer *inf = &w->informers[k];
    if (!(w->kinds & (1u << k)) || inf->synced || !inf->stats.failures)
      continue;
    kcm_log_plain(&said, inf->last_error[0] ? inf->last_error : "the error above says why",
                  sizeof(inf->last_error));
    fprintf(stderr, "kcm why: cannot list %s in namespace %s: %.*s\n",
            kcm_api_kind((enum kcm_kind)k)->plural, w->ns, (int)said.len,
            said.data ? said.data : "");
    kcm_buf_release(&said);
    return true;
  }
  return false;
}

/* --- objects read whole -------------------------------------------------------------- */

static struct why_text *text_find(struct kcm_why *w, uint8_t kind, const char *name) {
  size_t i;
  for (i = 0; i < TEXTS; i++)
    if (w->texts[i].name[0] && w->texts[i].kind == kind && !strcmp(w->texts[i].name, name))
      return &w->texts[i];
  return NULL;
}

/* A slot for another text: a free one, or one this answer has not asked
 * for that is not being read; NULL when every slot is in use. */
static struct why_text *text_slot(struct kcm_why *w) {
  size_t i;
  for (i = 0; i < TEXTS; i++)
    if (!w->texts[i].name[0])
      return &w->texts[i];
  for (i = 0; i < TEXTS; i++) {
    struct why_text *t = &w->texts[i];
    if (t->asked != w->answers && t->state != TEXT_READING) {
      free(t->body);
      memset(t, 0, sizeof(*t));
      return t;
    }
  }
  return NULL;
}

/* Let go of the texts the last answer did not ask for. */
static void texts_trim(struct kcm_why *w) {
  size_t i;
  for (i = 0; i < TEXTS; i++) {
    struct why_text *t = &w->texts[i];
    if (t->name[0] && t->asked != w->answers && t->state != TEXT_READING) {
      free(t->body);
      memset(t, 0, sizeof(*t));
    }
  }
}

/* kcm_controllers_why's text(). */
static const char *text_of(void *ctx, enum kcm_kind kind, const char *name, size_t *len) {
  struct kcm_why *w = ctx;
  struct why_text *t = text_find(w, (uint8_t)kind, name);
  *len = 0;
  if (w->refused & (1u << kind))
    return NULL;
  if (!t) {
    if (strlen(name) > KCM_API_NAME_MAX || !(t = text_slot(w)))
      return NULL;
    t->w = w;
    t->kind = (uint8_t)kind;
    strcpy(t->name, name);
    t->state = TEXT_WANTED;
  }
  t->asked = w->answers;
  if (t->state != TEXT_READ)
    return NULL;
  *len = t->len;
  return t->body;
}

/* A read of t failed: said once for its kind (not for an object gone
 * meanwhile); a refused kind is not asked for again. */
static void text_failed(struct kcm_why *w, struct why_text *t,
                        const struct kcm_client_response *r) {
  struct kcm_buf said = KCM_BUF_INIT(1024);
  t->state = TEXT_FAILED;
  if (r->status == 404 || (w->told & (1u << t->kind)))
    return;
  w->told |= 1u << t->kind;
  if (r->status == 403)
    w->refused |= 1u << t->kind;
  kcm_log_plain(&said, r->err ? r->message : "out of memory", 300);
  fprintf(stderr, "kcm why: cannot read %s %s in namespace %s: %.*s; %s are shown without what "
          "their status says\n", kcm_api_kind((enum kcm_kind)t->kind)->singular, t->name, w->ns,
          (int)said.len, said.data ? said.data : "", kcm_api_kind((enum kcm_kind)t->kind)->plural);
  kcm_buf_release(&said);
}

static void text_read(const struct kcm_client_response *r, void *data) {
  struct why_text *t = data;
  struct kcm_why *w = t->w;
  t->req = NULL;
  w->reading--;
  w->changed = true;
  if (r->err == KCM_ECANCELED || (t->stale && w->watch)) {
    t->state = TEXT_WANTED;
    t->stale = false;
    return;
  }
  t->stale = false;
  if (r->err || !(t->body = malloc(r->body_len + 1))) {
    text_failed(w, t, r);
    return;
  }
  memcpy(t->body, r->body, r->body_len + 1);
  t->len = r->body_len;
  t->state = TEXT_READ;
}

/* Start reading the texts the last answer wanted; how many are being read. */
static int texts_read(struct kcm_why *w) {
  char path[PATH_MAX_BYTES];
  size_t i;
  for (i = 0; i < TEXTS; i++) {
    struct why_text *t = &w->texts[i];
    struct kcm_client_request_options o = {0};
    if (!t->name[0] || t->state != TEXT_WANTED || t->asked != w->answers)
      continue;
    t->state = TEXT_FAILED;
    if (kcm_client_object_path((enum kcm_kind)t->kind, w->ns, t->name, NULL, path,
                               sizeof(path)))
      continue;
    o.method = "GET";
    o.path = path;
    o.timeout_ms = (long)w->timeout_ms;
    o.done = text_read;
    o.data = t;
    if (kcm_client_request(w->client, &o, &t->req))
      continue;
    t->state = TEXT_READING;
    w->reading++;
  }
  return w->reading;
}

/* An object changed: with --watch its text, if read, is read again when
 * next asked for (one answer reads each text once). */
static void text_changed(struct kcm_why *w, const struct kcm_object *o) {
  struct why_text *t = w->watch && o->name ? text_find(w, o->kind, o->name) : NULL;
  if (!t)
    return;
  if (t->state == TEXT_READING)
    t->stale = true;
  else {
    free(t->body);
    t->body = NULL;
    t->len = 0;
    t->state = TEXT_WANTED;
  }
}

/* The columns s[0..n) takes on a terminal (wcwidth() in the locale; a
 * column a code point where that cannot tell). */
static unsigned columns(const char *s, size_t n) {
  mbstate_t st;
  wchar_t wc;
  unsigned cols = 0;
  memset(&st, 0, sizeof(st));
  while (n) {
    size_t k = mbrtowc(&wc, s, n, &st);
    if (k == (size_t)-1 || k == (size_t)-2 || k == 0) {
      memset(&st, 0, sizeof(st));
      for (k = 1; k < n && ((unsigned char)s[k] & 0xc0) == 0x80; k++)
        ;
      cols++;
    } else {
      int cw = wcwidth(wc);
      cols += cw < 0 ? 1u : (unsigned)cw;
    }
    s += k;
    n -= k;
  }
  return cols;
}

/* The terminal rows text takes at the terminal's width; *height, its rows. */
static unsigned rows_of(const char *text, unsigned *height) {
  struct winsize ws;
  bool sized = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col;
  unsigned width = sized ? ws.ws_col : 80, rows = 0, cols;
  const char *line = text, *nl;
  *height = sized && ws.ws_row ? ws.ws_row : 24;
  for (; *line; line = nl + 1) {
    nl = strchr(line, '\n');
    cols = columns(line, nl ? (size_t)(nl - line) : strlen(line));
    rows += cols ? (cols + width - 1) / width : 1;
    if (!nl)
      break;
  }
  return rows;
}

/* Print an answer: on a terminal in place of the last one, when that one
 * fit on the screen (else below it); a line (--watch off a terminal, after
 * the first answer) after the local time. */
static void show(struct kcm_why *w, const char *text, bool line) {
  unsigned height;
  if (w->tty && w->rows)
    printf("\x1b[%uA\x1b[J", w->rows);
  if (line) {
    char when[16];
    time_t t = time(NULL);
    struct tm tm;
    if (localtime_r(&t, &tm) && strftime(when, sizeof(when), "%H:%M:%S ", &tm))
      fputs(when, stdout);
  }
  fputs(text, stdout);
  fflush(stdout);
  if (w->tty) {
    w->rows = rows_of(text, &height);
    if (w->rows >= height)
      w->rows = 0;
  }
}

/* The row's answer into out (cleared first); 0 or an error. */
static int ask(struct kcm_why *w, bool line, struct kcm_buf *out, int *ended) {
  struct kcm_controllers_why in = {.informers = w->informers, .ns = w->ns, .name = w->name,
                                   .json = w->json, .line = line, .text = text_of, .ctx = w};
  uv_timeval64_t now;
  uv_gettimeofday(&now);
  in.now_ms = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_usec / 1000;
  kcm_buf_reset(out);
  *ended = 0;
  return w->row->why(&in, out, ended);
}

/* Print the row's answer when it differs from the last. --watch off a
 * terminal gives the whole answer first, then a line per change. */
static void answer(struct kcm_why *w) {
  struct kcm_buf out = KCM_BUF_INIT(ANSWER_MAX);
  bool lines = w->watch && !w->json && !w->tty;
  int ended = 0;
  int err;

  w->answers++;
  err = ask(w, lines && w->last, &out, &ended);
  if (!err && texts_read(w)) {
    /* answered again once the texts it asked for are read */
  } else if (err == KCM_ENOTFOUND) {
    fprintf(stderr, "kcm why: %s %s not found in namespace %s\n",
            kcm_api_kind(w->row->kind)->singular, w->name, w->ns);
    finish(w, WHY_READ);
  } else if (err) {
    fprintf(stderr, "kcm why: cannot answer: %s\n", kcm_strerror(err));
    finish(w, WHY_READ);
  } else {
    texts_trim(w);
    if (!w->last || strcmp(w->last, out.data ? out.data : "")) {
      show(w, out.data ? out.data : "", lines && w->last);
      if (lines && !w->last && !ended)
        err = ask(w, true, &out, &ended); /* the line the next change is told from */
      free(w->last);
      w->last = err ? NULL : kcm_buf_take(&out);
    }
    if (!w->watch || ended || err)
      finish(w, err ? WHY_READ : w->watch && ended < 0 ? WHY_FAILED : WHY_OK);
  }
  kcm_buf_release(&out);
}

static void on_check(uv_timer_t *t) {
  struct kcm_why *w = t->data;
  int k;
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if ((w->kinds & (1u << k)) && !kcm_informer_synced(&w->informers[k])) {
      if (read_failed(w))
        finish(w, WHY_READ);
      else if (uv_now(&w->loop) - w->started > w->timeout_ms) {
        fprintf(stderr, "kcm why: the reads did not finish within %llu ms\n",
                (unsigned long long)w->timeout_ms);
        finish(w, WHY_READ);
      }
      return;
    }
  if (!w->reading && (w->changed || !w->last)) {
    w->changed = false;
    answer(w);
  }
}

static void on_change(void *ctx, struct kcm_object *o) {
  struct kcm_why *w = ctx;
  w->changed = true;
  text_changed(w, o);
}
static void on_update(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  (void)old;
  on_change(ctx, cur);
}
static void on_delete(void *ctx, struct kcm_object *o, bool unknown) {
  (void)unknown;
  on_change(ctx, o);
}

static int run(struct kcm_why *w) {
  struct kcm_informer_handler h = {on_change, on_update, on_delete, w};
  int k;
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if ((w->kinds & (1u << k)) && kcm_informer_add_handler(&w->informers[k], &h))
      return WHY_READ;
  uv_timer_init(&w->loop, &w->check);
  w->check.data = w;
  w->started = uv_now(&w->loop);
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (w->kinds & (1u << k))
      kcm_informer_start(&w->informers[k]);
  uv_timer_start(&w->check, on_check, CHECK_MS, CHECK_MS);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  return w->rc;
}

static void teardown(struct kcm_why *w) {
  int k;
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (w->kinds & (1u << k))
      kcm_informer_release(&w->informers[k]);
  if (w->loop_up) {
    kcm_intern_release(&w->pool);
    uv_loop_close(&w->loop);
  }
  kcm_client_config_release(&w->cfg);
  free(w->last);
  for (k = 0; k < TEXTS; k++)
    free(w->texts[k].body);
}

int kcm_why_main(int argc, char **argv) {
  struct kcm_why w;
  int rc;
  memset(&w, 0, sizeof(w));
  w.tty = isatty(STDOUT_FILENO) && getenv("TERM") && strcmp(getenv("TERM"), "dumb");
  if (w.tty)
    setlocale(LC_CTYPE, ""); /* the terminal's widths of what is printed */
  kcm_log_set_verbosity(0);
  if ((rc = parse(&w, argc, argv)))
    return rc < 0 ? WHY_OK : rc;
  rc = setup(&w);
  if (!rc)
    rc = run(&w);
  teardown(&w);
  return rc;
}
