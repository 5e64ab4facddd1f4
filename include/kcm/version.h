/*
 * version — what kcm reports about its build: the version (KCM_VERSION,
 * from CMake), the platform and the compiler, for --version, the
 * kcm_build_info metric and the User-Agent of its requests. The commit,
 * tree state and build date are known to src/version/version.c only, so
 * that a new build date rebuilds one small file.
 */
#ifndef KCM_VERSION_H
#define KCM_VERSION_H

#include <stdbool.h>
#include <stdio.h>

#include "kcm/buf.h"

#if defined(__x86_64__)
#define KCM_PLATFORM "linux/amd64"
#elif defined(__aarch64__)
#define KCM_PLATFORM "linux/arm64"
#else
#define KCM_PLATFORM "linux/unknown"
#endif

#ifdef __clang__
#define KCM_COMPILER "clang " __clang_version__
#else
#define KCM_COMPILER "gcc " __VERSION__
#endif

/* The User-Agent of kcm's requests, as client-go writes one: with a
 * component, "kcm/vVERSION (OS/ARCH) kcm/COMPONENT". The first word is the
 * program's name (kcm_client_set_program()), which kube-apiserver records
 * as the field manager of kcm's writes. */
#define KCM_USER_AGENT "kcm/v" KCM_VERSION " (" KCM_PLATFORM ") kcm"
#define KCM_USER_AGENT_REST "/v" KCM_VERSION " (" KCM_PLATFORM ") kcm"

/* --version: "kcm vX.Y.Z (commit C, built D)"; raw: as Kubernetes
 * components print version.Info. */
void kcm_version_print(FILE *out, bool raw);
/* The kcm_build_info gauge, in the text format. 0 or an error of
 * kcm_metrics. */
int kcm_version_metrics(struct kcm_buf *out);

#endif
