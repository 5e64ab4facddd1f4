"""Scenarios about the kcm process itself."""

from harness import scenario, wait_for


@scenario("kcm connects to the API server and keeps running")
def kcm_connects(ctx):
    kcm = ctx.env.kcm
    if kcm is None:
        return
    wait_for(lambda: "connected to the API server" in kcm.text(), timeout=30,
             what="kcm to log its connection")
    assert kcm.alive(), "kcm exited: %s" % kcm.text()[-2000:]
