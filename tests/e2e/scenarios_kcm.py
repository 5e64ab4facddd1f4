"""Scenarios about the kcm process itself."""

import os

from harness import Kcm, scenario, wait_for


@scenario("kcm connects to the API server and keeps running")
def kcm_connects(ctx):
    kcm = ctx.env.kcm
    if kcm is None or not ctx.env.kcm_binary.endswith("/kcm"):
        return  # another controller-manager logs differently
    wait_for(lambda: "connected to the API server" in kcm.text(), timeout=30,
             what="kcm to log its connection")
    assert kcm.alive(), "kcm exited: %s" % kcm.text()[-2000:]


def _sim_cluster(env):
    """The server URL and CA data of the local API server's kubeconfig."""
    import re
    text = open(env.kubeconfig).read()
    server = re.search(r"server: (\S+)", text).group(1)
    ca = re.search(r"certificate-authority-data: (\S+)", text).group(1)
    return server, ca


def _kubeconfig(path, server, ca, user_yaml):
    with open(path, "w") as f:
        f.write("current-context: x\n"
                "clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s}}]\n"
                "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                "users:\n- name: u\n  user:\n%s" % (server, ca, user_yaml))
    os.chmod(path, 0o600)


def _expect_sync(kcm, what):
    try:
        wait_for(lambda: "caches synced" in kcm.text() or not kcm.alive(), timeout=30,
                 what="kcm to sync its caches with %s" % what)
        assert "caches synced" in kcm.text(), "kcm with %s: %s" % (what, kcm.text()[-2000:])
    finally:
        code = kcm.stop()
    assert code == 0, "kcm with %s exited %s" % (what, code)


@scenario("kcm syncs its caches with every kind of credential", needs_sim=True)
def every_credential(ctx):
    env, sim = ctx.env, ctx.env.sim
    if not env.kcm_binary.endswith("/kcm"):
        return
    d = os.path.join(env.workdir, "credentials")
    os.makedirs(d, exist_ok=True)
    server, ca = _sim_cluster(env)
    token = open(os.path.join(sim.dir, "token")).read().strip()
    with open(os.path.join(d, "token"), "w") as f:
        f.write(token + "\n")
    plugin = os.path.join(d, "plugin.sh")
    with open(plugin, "w") as f:
        f.write("#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}'\n" % token)
    os.chmod(plugin, 0o755)
    users = {
        "a bearer token": "    token: %s\n" % token,
        "a token file": "    tokenFile: token\n",
        "a client certificate": "    client-certificate: %s\n    client-key: %s\n" % (
            os.path.join(sim.dir, "client.crt"), os.path.join(sim.dir, "client.key")),
        "an exec plugin": "    exec: {apiVersion: client.authentication.k8s.io/v1, "
                          "command: ./plugin.sh, interactiveMode: Never}\n",
    }
    for i, (what, user) in enumerate(users.items()):
        path = os.path.join(d, "kubeconfig-%d" % i)
        _kubeconfig(path, server, ca, user)
        _expect_sync(Kcm(ctx.env.kcm_binary, path, d, log_name="kcm-%d.log" % i), what)
    # In a pod: the service host and port in the environment, and the
    # service account's token, CA and namespace in files.
    sa = os.path.join(d, "serviceaccount")
    os.makedirs(sa, exist_ok=True)
    with open(os.path.join(sa, "token"), "w") as f:
        f.write(token)
    with open(os.path.join(sa, "namespace"), "w") as f:
        f.write("kube-system\n")
    with open(os.path.join(sim.dir, "ca.crt")) as src, open(os.path.join(sa, "ca.crt"), "w") as f:
        f.write(src.read())
    port = server.rsplit(":", 1)[1]
    incluster_env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port,
                     "KCM_SERVICEACCOUNT_DIR": sa, "HOME": d, "KUBECONFIG": ""}
    _expect_sync(Kcm(ctx.env.kcm_binary, None, d, log_name="kcm-incluster.log",
                     env=incluster_env), "in-cluster settings")
