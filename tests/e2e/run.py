#!/usr/bin/env python3
"""Run the e2e scenarios with kubectl against the local API server (started
here with its fake kubelet) and kcm, or against a real cluster when
KCM_E2E_KUBECONFIG names its kubeconfig.

    python3 tests/e2e/run.py --kcm build/kcm [-k substring] [--keep]

Each scenario runs in a namespace of its own and ends PASS, FAIL (an
assertion: what kcm or the cluster did is wrong), ERROR (the harness or a
tool broke, with its traceback) or SKIP (with the reason: it needs the local
API server, or does not apply). The last line printed is
`N passed, N failed, N harness errors, N skipped`; the exit status is
non-zero when any failed or erred.

Against the local API server kcm runs as its ServiceAccount with the RBAC
objects of manifests/base only; given --kcm-arg=--use-service-account-credentials,
as the user system:kube-controller-manager with upstream's bootstrap roles
and the RBAC objects of manifests/static-pod only, as kubeadm runs it.

With --with-shadow a second kcm runs beside the suite's with --shadow and
the same flags: at the end it must have compared syncs, found no
disagreement, and (on the local API server, by its audit log) sent nothing
but reads.

Environment:
  KCM_E2E_KUBECONFIG   run against this cluster instead of the local API server
  KCM_E2E_KCM_KUBECONFIG  there, the kubeconfig kcm runs with (default: the
                       harness's own)
  KCM_E2E_START_KCM=0  do not start kcm (it already runs in that cluster)
  KCM_E2E_ONLY_LOCAL=1  as --only-local
  KCM_E2E_LEGACY_EVENTS=1  expect the ScalingReplicaSet wording of releases
                       before 1.31 ("Scaled up replica set X to 3")
"""

import argparse
import json
import os
import shutil
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import scenarios_deployment  # noqa: E402,F401  (registers scenarios)
import scenarios_conflict  # noqa: E402,F401
import scenarios_faults  # noqa: E402,F401
import scenarios_hostile  # noqa: E402,F401
import scenarios_kcm  # noqa: E402,F401
import scenarios_monitoring  # noqa: E402,F401
import scenarios_replicaset  # noqa: E402,F401
import scenarios_secure  # noqa: E402,F401
import scenarios_serving  # noqa: E402,F401
import scenarios_shadow  # noqa: E402,F401
import scenarios_shards  # noqa: E402,F401
import scenarios_strategies  # noqa: E402,F401
import scenarios_why  # noqa: E402,F401


SANITIZER = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def sanitizer_reports(workdir):
    """The first sanitizer line of each controller-manager log, for a build
    with AddressSanitizer and UndefinedBehaviorSanitizer (leaks at exit
    included); none for any other build."""
    for root, _, files in os.walk(workdir):
        for name in sorted(files):
            if not name.endswith(".log"):
                continue
            path = os.path.join(root, name)
            with open(path, errors="replace") as f:
                line = next((ln.strip() for ln in f if any(s in ln for s in SANITIZER)), None)
            if line:
                yield path, line


def check_shadow(env):
    """The suite's shadows (one per stretch between scenarios that stop the
    suite's kcm): syncs compared, no disagreement, no write."""
    name = "the shadow kcm agreed with the live one and wrote nothing"
    try:
        assert env.stop_shadow() == 0, "the shadow did not exit 0 on SIGTERM"
        controllers = [c for r in env.shadow_reports for c in r["controllers"]]
        compared = sum(c["compared"] for c in controllers)
        disagreements = [d for c in controllers for d in c["latest"]]
        assert compared > 0, "the shadow compared nothing: %s" % env.shadow_reports
        assert not disagreements, "the shadow disagreed: %s" % json.dumps(disagreements, indent=1)
        if env.sim:
            writes = env.shadow_writes()
            assert not writes, "the shadow sent %d writes, first %s" % (len(writes), writes[0])
        print("PASS %s (%d syncs compared)" % (name, compared), flush=True)
        return True
    except Exception as e:  # an assertion, or the report unreadable
        print("FAIL %s: %s" % (name, e), flush=True)
        return False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kcm", required=True,
                   help="path to the kcm binary (or another controller-manager to compare)")
    p.add_argument("--kcm-arg", action="append", default=[],
                   help="an extra argument for the controller-manager (repeatable)")
    p.add_argument("-k", default="", help="run only scenarios whose name contains this")
    p.add_argument("--keep", action="store_true", help="keep namespaces and the work directory")
    p.add_argument("--only-local", action="store_true",
                   default=os.environ.get("KCM_E2E_ONLY_LOCAL") == "1",
                   help="on the local API server, run only the scenarios that need it (the "
                   "rest run against a real one); the others are counted as skipped")
    p.add_argument("--with-shadow", action="store_true",
                   help="run a kcm with --shadow beside the suite's and check its report")
    p.add_argument("--shadow-window", default="1m",
                   help="the shadow's --shadow-window (default 1m, kcm's: longer than the "
                   "30 s an informer's backoff reaches when the server breaks every watch)")
    p.add_argument("--sharded", type=int, default=0, metavar="N",
                   help="run N kcm instances with --shards as the suite's controller-manager; "
                   "the scenarios about one kcm process skip")
    args = p.parse_args()
    if not os.access(args.kcm, os.X_OK):
        sys.exit("run.py: %s is not an executable kcm binary" % args.kcm)

    if not any(args.k in name for name, _, _ in harness.SCENARIOS):
        sys.exit("run.py: no scenario name contains %r" % args.k)

    if args.with_shadow and not harness.is_kcm(args.kcm):
        sys.exit("run.py: --with-shadow needs kcm as the controller-manager")
    if args.sharded and (args.with_shadow or not harness.is_kcm(args.kcm)):
        sys.exit("run.py: --sharded runs kcm instances, without --with-shadow")
    env = harness.Env(os.path.abspath(args.kcm), args.kcm_arg, args.sharded)
    passed = failed = errors = skipped = 0
    try:  # from here on, whatever breaks, what was started is stopped
        if args.with_shadow:
            env.shadow_args = (*[a for a in args.kcm_arg
                                 if not harness.uses_service_account_credentials([a])],
                               "--shadow-window=" + args.shadow_window)
            env.start_shadow("shadow.log")
        mode = "cluster %s" % env.kubeconfig if env.real else "local API server %s" % env.sim.url
        print("e2e against the %s; work directory %s" % (mode, env.workdir), flush=True)
        run_id = "%x" % (int(time.time()) % 0xfffff)
        for i, (name, fn, needs_sim) in enumerate(harness.SCENARIOS):
            if args.k not in name:
                continue
            if needs_sim and env.real:
                skipped += 1
                print("SKIP %s (needs the local API server: %s)" % (name, needs_sim),
                      flush=True)
                continue
            if args.only_local and not needs_sim and not env.real:
                skipped += 1
                continue
            ns = "e2e-%s-%d" % (run_id, i)
            k = env.kubectl()
            started = time.monotonic()
            try:
                k("create", "namespace", ns)
                fn(harness.Context(env, ns))
                passed += 1
                print("PASS %s (%.1fs)" % (name, time.monotonic() - started), flush=True)
            except harness.Skip as e:
                skipped += 1
                print("SKIP %s (%s)" % (name, e), flush=True)
            except AssertionError as e:  # a scenario's failure, reported and counted
                failed += 1
                print("FAIL %s (%.1fs): %s" % (name, time.monotonic() - started, e), flush=True)
            except Exception as e:  # the harness or a tool broke, not an assertion
                errors += 1
                print("ERROR %s (%.1fs): harness error %s: %s" % (
                    name, time.monotonic() - started, type(e).__name__, e), flush=True)
                traceback.print_exc()
            finally:
                if not args.keep:
                    k.run("delete", "namespace", ns, "--wait=false", check=False)
        if args.with_shadow:
            ok = check_shadow(env)
            passed += ok
            failed += not ok
    finally:
        code = env.close()
        if env.kcm is not None and code != 0 and env.is_kcm:
            failed += 1
            print("FAIL kcm exited with status %s on SIGTERM; log: %s" % (code, env.kcm.log_path))
        for path, line in sanitizer_reports(env.workdir):
            failed += 1
            print("FAIL a sanitizer reported in %s: %s" % (path, line))
    if failed or errors or args.keep:
        print("logs kept in %s" % env.workdir)
    else:
        shutil.rmtree(env.workdir, ignore_errors=True)
    print("%d passed, %d failed, %d harness errors, %d skipped" % (
        passed, failed, errors, skipped), flush=True)
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
