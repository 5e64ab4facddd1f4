#!/usr/bin/env bash
# A real node for a cluster of ../cluster.sh: kubelet (built with the
# cluster by ../build.sh) on Debian's containerd and runc, its pods on a
# bridge of Debian's CNI plugins, and the cluster's `kubernetes` Service
# answered at its ClusterIP as kube-proxy would (service_proxy.py relays
# 10.96.0.1:443 to kube-apiserver on loopback). The node is kcm-node,
# labelled as a control-plane node; its static pods' directory is
# DIR/node/manifests. Its runtime holds, before it registers, the image of
# standin.c as localhost/kcm-e2e/pause:1 (the pods' sandbox) and under each
# name of KCM_NODE_STANDIN_NAMES (e.g. upstream's agnhost and pause images,
# which it stands in for), and each IMAGE (an OCI archive).
#
#   bash tests/k8s/node/node.sh up DIR [IMAGE.tar...]   # DIR: a cluster's
#   bash tests/k8s/node/node.sh down DIR
#
# The bridge (kcm-node0, 10.244.0.1/24) and 10.96.0.1 are the host's, so
# one node runs on a machine at a time. Needs root, containerd, runc and
# the CNI plugins (bash tests/setup.sh installs them); exits 3, saying
# why, when it cannot run here.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=${1:-}
dir=${2:-}
if [ -z "$dir" ] || { [ "$cmd" != up ] && [ "$cmd" != down ]; }; then
  echo "usage: $0 up DIR [IMAGE.tar...] | down DIR" >&2
  exit 2
fi
dir=$(cd "$dir" && pwd)
shift 2
n=$dir/node
bridge=kcm-node0
gateway=10.244.0.1
service_ip=10.96.0.1
cgroup=kcm-node
sock=$n/containerd.sock

cgroup_dirs() {
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "/sys/fs/cgroup/$cgroup"
  else
    local h
    for h in /sys/fs/cgroup/*/; do
      [ -L "${h%/}" ] || echo "$h$cgroup"
    done
  fi
}

down() {
  local pid t m d
  [ -d "$n" ] || return 0
  # kubelet first, so nothing restarts what is stopped next.
  for pid in $(tac "$n/pids" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = containerd ] && continue
    kill -TERM "$pid" 2>/dev/null || true
  done
  if [ -S "$sock" ]; then
    for t in $(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$sock" -n k8s.io tasks kill -s KILL "$t" >/dev/null 2>&1 || true
    done
    for _ in $(seq 50); do
      [ -z "$(ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null | head -1)" ] && break
      ctr -a "$sock" -n k8s.io tasks ls -q 2>/dev/null | xargs -r -n1 \
        ctr -a "$sock" -n k8s.io tasks delete >/dev/null 2>&1 || true
      sleep 0.1
    done
  fi
  for pid in $(tac "$n/pids" 2>/dev/null); do
    kill -TERM "$pid" 2>/dev/null || true
  done
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null || true
  for pid in $(tac "$n/pids" 2>/dev/null); do
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$n/pids"
  # The containers' mounts and network namespaces, all under DIR/node.
  awk -v n="$n/" 'index($2, n) == 1 { print $2 }' /proc/self/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  ip link del "$bridge" 2>/dev/null || true
  ip addr del "$service_ip/32" dev lo 2>/dev/null || true
  for d in $(cgroup_dirs); do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  return 0
}

if [ "$cmd" = down ]; then
  down
  exit 0
fi

why=""
[ "$(id -u)" -eq 0 ] || why="not root"
for tool in containerd runc ctr buildah gcc; do
  command -v "$tool" >/dev/null || why="${why:+$why; }no $tool"
done
[ -x /usr/lib/cni/bridge ] || why="${why:+$why; }no CNI plugins in /usr/lib/cni"
if [ -n "$why" ]; then
  echo "node: a real node cannot run here: $why (bash tests/setup.sh installs the tools)" >&2
  exit 3
fi
if ip link show "$bridge" >/dev/null 2>&1 || ip -o addr show dev lo | grep -q " $service_ip/"; then
  echo "node: $bridge or $service_ip is taken: another node is up here, or one was not" \
    "taken down (node.sh down ITS_DIR, or: ip link del $bridge; ip addr del $service_ip/32 dev lo)" >&2
  exit 1
fi
[ -f "$dir/kubeconfig-node" ] || { echo "node: $dir is not a cluster of cluster.sh" >&2; exit 1; }
bin=$(bash "$here/../build.sh")
[ -d "$n" ] && down
rm -rf "$n"
mkdir -p "$n/manifests" "$n/cni" "$n/logs" "$n/pods"
trap 'rc=$?; [ $rc -eq 0 ] || { echo "node: up failed; logs in $n/logs" >&2; down; }' EXIT

# Two ports free now, different (each held until both are picked).
free_ports() {
  python3 -c 'import socket
held = [socket.socket() for _ in range(2)]
for s in held:
    s.bind(("0.0.0.0", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))'
}
k() { kubectl --kubeconfig "$dir/kubeconfig" "$@"; }

# --- the host's side: cgroups, the bridge, the Service's address -----------------------------
for d in $(cgroup_dirs); do mkdir -p "$d"; done
# A MAC address of its own: else the bridge takes the lowest of its ports',
# and a pod's veth joining with a lower one changes the gateway's address
# under the other pods, cut off until their ARP entries expire.
ip link add "$bridge" address 02:6b:63:6d:00:01 type bridge
ip addr add "$gateway/24" dev "$bridge"
ip link set "$bridge" up
ip addr add "$service_ip/32" dev lo
api=$(sed -n 's|^ *server: https://127.0.0.1:\([0-9]*\)$|\1|p' "$dir/kubeconfig" | head -1)
python3 "$here/service_proxy.py" "$service_ip" 443 127.0.0.1 "$api" >"$n/logs/service-proxy.log" 2>&1 &
echo $! >>"$n/pids"

# --- containerd -------------------------------------------------------------------------------
cat >"$n/cni/10-kcm-node.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "kcm-node", "plugins": [
  {"type": "bridge", "bridge": "$bridge", "isGateway": true, "isDefaultGateway": true,
   "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]],
            "dataDir": "$n/ipam"}}]}
EOF
# A negative oom_score_adj (kubelet asks -998 for the pause container) is
# refused in some sandboxes: restrict_oom_score_adj keeps it at
# containerd's own.
cat >"$n/containerd.toml" <<EOF
version = 2
root = "$n/containerd"
state = "$n/state"
[grpc]
  address = "$sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/kcm-e2e/pause:1"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$n/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      Root = "$n/runc"
EOF
containerd --config "$n/containerd.toml" >"$n/logs/containerd.log" 2>&1 &
echo $! >>"$n/pids"
for _ in $(seq 100); do
  ctr -a "$sock" version >/dev/null 2>&1 && break
  sleep 0.1
done
ctr -a "$sock" version >/dev/null

# The stand-in image, from standin.c, under its names; then the images
# asked for.
mkdir -p "$n/pause"
gcc -Os -static -o "$n/pause/standin" "$here/standin.c"
strip "$n/pause/standin"
store=(--root "$n/buildah" --runroot "$n/buildah-run" --storage-driver vfs)
c=$(buildah "${store[@]}" from scratch)
buildah "${store[@]}" copy "$c" "$n/pause/standin" /standin >/dev/null
buildah "${store[@]}" config --entrypoint '["/standin"]' --user 65535:65535 "$c"
buildah "${store[@]}" commit -q --timestamp 0 "$c" localhost/kcm-e2e/pause:1 >/dev/null
buildah "${store[@]}" push -q localhost/kcm-e2e/pause:1 \
  "oci-archive:$n/pause/pause.tar:localhost/kcm-e2e/pause:1" >/dev/null
buildah "${store[@]}" rm "$c" >/dev/null
rm -rf "$n/buildah" "$n/buildah-run"
for image in "$n/pause/pause.tar" "$@"; do
  ctr -a "$sock" -n k8s.io images import "$image" >/dev/null ||
    { echo "node: containerd cannot import $image" >&2; exit 1; }
done
for name in ${KCM_NODE_STANDIN_NAMES:-}; do
  ctr -a "$sock" -n k8s.io images tag localhost/kcm-e2e/pause:1 "$name" >/dev/null
done

# --- kubelet ----------------------------------------------------------------------------------
read -r port healthz < <(free_ports)
cat >"$n/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine's cgroups may be v1; kubelet 1.37 runs on them when told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cgroup
containerRuntimeEndpoint: unix://$sock
staticPodPath: $n/manifests
podLogsDir: $n/pods
address: $gateway
port: $port
healthzBindAddress: 127.0.0.1
healthzPort: $healthz
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
failSwapOn: false
resolvConf: /etc/resolv.conf
# A test machine's disk may be nearly full: never evict, never collect.
evictionHard: {memory.available: "0%", nodefs.available: "0%", imagefs.available: "0%"}
imageGCHighThresholdPercent: 100
EOF
"$bin/kubelet" --kubeconfig "$dir/kubeconfig-node" --config "$n/kubelet.yaml" \
  --root-dir "$n/kubelet" --cert-dir "$n/kubelet/pki" --hostname-override kcm-node \
  --node-ip "$gateway" >"$n/logs/kubelet.log" 2>&1 &
kubelet_pid=$!
echo $kubelet_pid >>"$n/pids"
for _ in $(seq 600); do
  k get node kcm-node >/dev/null 2>&1 && break
  kill -0 "$kubelet_pid" 2>/dev/null || break
  sleep 0.1
done
if ! k get node kcm-node >/dev/null 2>&1; then
  echo "node: kubelet did not register:" >&2
  grep -E '^[EF][0-9]{4}' "$n/logs/kubelet.log" | tail -3 >&2 || true
  exit 1
fi
# kubelet may not label its own node with a role (NodeRestriction).
k label node kcm-node node-role.kubernetes.io/control-plane= >/dev/null
k wait --for=condition=Ready node/kcm-node --timeout=120s >/dev/null
echo "node: kcm-node Ready (kubelet $(basename "$bin"), containerd" \
  "$(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1 {print $3}'))" >&2
