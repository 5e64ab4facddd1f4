/*
 * options — kcm's command line: kcm's own table of flags, and the flag
 * groups of its controllers (each row's, kcm/controllers.h), drive
 * parsing, validation and --help, in sections as kube-controller-manager
 * prints them, with kube-controller-manager's names and defaults.
 *
 * Flags are "--name=value", "--name value", or "-v N"; a boolean flag alone
 * means true; '_' in a name reads as '-', as kube-controller-manager
 * normalizes names. Every flag of kube-controller-manager is accepted:
 * those kcm implements keep its meaning and default, those of controllers
 * and features kcm does not have are listed in o->ignored for one warning,
 * so that kubeadm's and k3s's argument lists can be reused unchanged. A
 * bad flag is reported as "invalid value "x" for flag --name: why" (or
 * "unknown flag: ..."); as kube-controller-manager does, the usage is
 * printed first and "Error: why" last, where a terminal still shows it,
 * and the exit status is 1. With --logging-format=json, wherever it stands
 * on the command line, the error is one JSON line instead, with no usage.
 */
#ifndef KCM_OPTIONS_H
#define KCM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KCM_OPTIONS_MAX_IGNORED 160

/* How a flag's value is read. */
enum kcm_options_type {
  KCM_OPTIONS_STRING,       /* any text: const char * */
  KCM_OPTIONS_POSITIVE,     /* an int >= 1 */
  KCM_OPTIONS_LEVEL,        /* an int >= 0 */
  KCM_OPTIONS_PORT,         /* an int, 0..65535 */
  KCM_OPTIONS_RATE,         /* a double >= 0 */
  KCM_OPTIONS_DURATION,     /* a Go duration: uint64_t milliseconds */
  KCM_OPTIONS_BOOLEAN,      /* true/false, or alone for true: bool */
  KCM_OPTIONS_ADDRESS,      /* [host]:port, a port alone, or 0 for off: const char * */
  KCM_OPTIONS_IP,           /* an IP address: const char * */
  KCM_OPTIONS_LOG_FORMAT,   /* text or json: bool, true for json */
  KCM_OPTIONS_CONTENT_TYPE, /* bool, true for application/json */
  KCM_OPTIONS_TLS_VERSION,  /* bool, true for VersionTLS13 */
  KCM_OPTIONS_VMODULE,      /* pattern=N,...: const char * */
  KCM_OPTIONS_GATES,        /* Name=true|false,...: const char * */
  KCM_OPTIONS_LOCK,         /* the leader election lock: leases only */
};

struct kcm_options_flag {
  const char *section; /* starts a section in --help when set */
  const char *name;    /* without the dashes */
  const char *value;   /* the value's name in --help; NULL for booleans */
  enum kcm_options_type type;
  size_t offset;       /* of its field in struct kcm_options, or in its group's settings */
  const char *help;    /* lines after the first are indented */
};

/* The flags a part of kcm owns (a controller: see kcm/controllers.h),
 * read into settings of its own: a struct of `size` bytes that starts as a
 * copy of `defaults`, kept in struct kcm_options (kcm_options_settings()).
 * Its flags' section comes in --help before the plain HTTP flags. All of it
 * static. */
struct kcm_options_group {
  const char *name;              /* "deployment": what --help says kcm runs */
  const char *const *controllers; /* the names --controllers takes for it, NULL-ended */
  const struct kcm_options_flag *flags;
  size_t nflags;
  const void *defaults;
  size_t size;                   /* at most KCM_OPTIONS_SETTINGS */
};

#define KCM_OPTIONS_GROUPS 8    /* groups at most */
#define KCM_OPTIONS_SETTINGS 64 /* bytes of a group's settings at most */

/* Every value is borrowed from argv or static; nothing needs freeing. */
struct kcm_options {
  /* connection */
  const char *kubeconfig, *context, *master;
  double qps;
  int burst;
  bool json_api;         /* --kube-api-content-type=application/json: no protobuf */
  /* controllers */
  const char *controllers;   /* see kcm_options_enables() */
  bool sa_credentials;   /* --use-service-account-credentials */
  uint64_t min_resync_ms;
  bool stand_aside;      /* --stand-aside-on-conflict */
  uint64_t conflict_quiet_ms;
  const char *conflict_system_namespaces; /* comma-separated; "" for none */
  int conflict_cluster_namespaces; /* 0: never stand aside everywhere by count */
  int shards;                   /* virtual shards shared by active instances; 0: off */
  bool shadow;           /* --shadow: write nothing, report the differences */
  uint64_t shadow_window_ms;
  /* leader election */
  bool leader_elect;
  uint64_t lease_ms, renew_ms, retry_ms;
  const char *lease_namespace; /* NULL: not given (kcm_campaign_lease_namespace) */
  const char *lease_name;
  uint64_t grace_ms;
  /* secure serving */
  int secure_port; /* 0: off */
  const char *bind_address;
  const char *cert_dir, *tls_cert_file, *tls_key_file;
  bool tls13_only; /* --tls-min-version=VersionTLS13 */
  /* authentication and authorization */
  const char *client_ca_file, *authn_kubeconfig, *authz_kubeconfig;
  uint64_t token_ttl_ms, allow_ttl_ms, deny_ttl_ms;
  const char *always_allow_paths;
  /* plain HTTP, for local runs: "0" when off; ":port" or "port" means
   * loopback (see kcm_options_local_address()) */
  const char *health_address, *metrics_address;
  /* logs */
  int verbosity;
  const char *vmodule;   /* pattern=N,... on kcm's source files */
  bool json_logs;
  /* kube-controller-manager's flags kcm accepts and does not act on, as
   * given ("--cluster-cidr"), for one warning; and the feature gates */
  const char *ignored[KCM_OPTIONS_MAX_IGNORED];
  size_t nignored;
  const char *feature_gates;
  bool no_watch_list;    /* WatchListClient=false in them: lists are not streamed */
  bool version_raw;      /* --version=raw */
  /* the groups parsed (NULL-ended, borrowed), and their settings in order */
  const struct kcm_options_group *const *groups;
  size_t ngroups;
  _Alignas(16) unsigned char settings[KCM_OPTIONS_GROUPS][KCM_OPTIONS_SETTINGS];
};

enum kcm_options_result {
  KCM_OPTIONS_RUN,     /* parsed: run */
  KCM_OPTIONS_HELP,    /* --help: print the usage, exit 0 */
  KCM_OPTIONS_VERSION, /* --version or --version=raw (o->version_raw) */
  KCM_OPTIONS_INVALID, /* err says why */
};

/* Fill *o with the defaults, then argv[1..argc): kcm's own flags and those
 * of groups (NULL-ended, at most KCM_OPTIONS_GROUPS; may be NULL), which
 * o borrows. */
enum kcm_options_result kcm_options_parse(struct kcm_options *o,
                                          const struct kcm_options_group *const *groups,
                                          int argc, char **argv, char *err, size_t err_len);
/* The settings of group g as parsed into o (a copy of its defaults when
 * none of its flags was given); NULL when o was not parsed with g. */
const void *kcm_options_settings(const struct kcm_options *o, const struct kcm_options_group *g);

/* The exit status of a flag error, kube-controller-manager's. */
#define KCM_OPTIONS_EXIT_FAILURE 1

/* A Go duration ("15s", "1m30s", "1.5s", "500ms", "0") in milliseconds.
 * Returns 0 or -1. */
int kcm_options_duration(const char *s, uint64_t *ms);

/* Parse argv as the program does: --help and --version answered on
 * stdout (0), a flag error on stderr (see kcm_options_fail()). JSON logs,
 * when argv asks for them, are turned on first. Returns -1 to run, or the
 * exit status. */
int kcm_options_main(struct kcm_options *o, const struct kcm_options_group *const *groups,
                     int argc, char **argv);
/* A flag error of o: on stderr the usage, then "Error: " and the message as
 * the last line; with JSON logs on, only an error line "command failed"
 * with the message as its err. Returns KCM_OPTIONS_EXIT_FAILURE. */
int kcm_options_fail(const struct kcm_options *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Warn, once each, of the flags, controllers (kcm_options_foreign()) and
 * feature gates given that kcm does not act on. */
void kcm_options_warn(const struct kcm_options *o);

/* Whether --controllers turns on a controller known by names (NULL-ended):
 * one of them named, or "*" with none of them as "-name". */
bool kcm_options_enables(const struct kcm_options *o, const char *const *names);
/* The names --controllers turns on that no group takes (kube-controller-
 * manager's other controllers), comma-separated into buf; "" when none. */
const char *kcm_options_foreign(const struct kcm_options *o, char *buf, size_t len);

/* The usage text, every flag (kcm's own and those of groups, NULL-ended)
 * with its section, value and default. */
void kcm_options_usage(FILE *out, const struct kcm_options_group *const *groups);

/* A plain-HTTP address as served: "0" stays off, a port alone (":8081"
 * or "8081") becomes "127.0.0.1:8081" (enabled without an address:
 * loopback only). */
const char *kcm_options_local_address(const char *addr, char *buf, size_t len);

#endif
