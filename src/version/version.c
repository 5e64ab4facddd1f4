/*
 * The build's commit, tree state and date (compile definitions of this
 * file alone), as --version and kcm_build_info report them.
 */
#include "kcm/version.h"
#include "kcm/metrics.h"

void kcm_version_print(FILE *out, bool raw) {
  if (raw)
    fprintf(out,
            "version.Info{Major:\"%d\", Minor:\"%d\", GitVersion:\"v%s\", GitCommit:\"%s\", "
            "GitTreeState:\"%s\", BuildDate:\"%s\", Compiler:\"%s\", Platform:\"%s\"}\n",
            KCM_VERSION_MAJOR, KCM_VERSION_MINOR, KCM_VERSION, KCM_GIT_COMMIT,
            KCM_GIT_TREE_STATE, KCM_BUILD_DATE, KCM_COMPILER, KCM_PLATFORM);
  else
    fprintf(out, "kcm v%s (commit %.12s, built %s)\n", KCM_VERSION, KCM_GIT_COMMIT,
            KCM_BUILD_DATE);
}

int kcm_version_metrics(struct kcm_buf *out) {
  const char *build[] = {"build_date", KCM_BUILD_DATE, "compiler", KCM_COMPILER,
                         "git_commit", KCM_GIT_COMMIT, "git_tree_state", KCM_GIT_TREE_STATE,
                         "git_version", "v" KCM_VERSION, "platform", KCM_PLATFORM, NULL};
  char labels[600];
  int err;
  if ((err = kcm_metrics_labels(labels, sizeof(labels), build)) ||
      (err = kcm_metrics_family(out, "kcm_build_info", "gauge",
                                "A metric with a constant '1' value labeled by the version, "
                                "commit and build of kcm.")))
    return err;
  return kcm_metrics_sample(out, "kcm_build_info", labels, 1);
}
