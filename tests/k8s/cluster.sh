#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, for kcm's tests: etcd and
# kube-apiserver (TLS, RBAC, token authentication, service-account
# signing, an audit log of every write), kube-scheduler,
# kube-controller-manager with the controllers it is given, and kwok
# running three fake nodes and their pods. Everything listens on free
# loopback ports and lives in DIR.
#
#   bash tests/k8s/cluster.sh up DIR [CONTROLLERS]   # default "*,-deployment,-replicaset"
#   bash tests/k8s/cluster.sh up DIR none            # etcd and kube-apiserver alone
#   bash tests/k8s/cluster.sh down DIR
#   KCM_K8S_KWOK_NODES=0 bash tests/k8s/cluster.sh up DIR   # no kwok (for node/node.sh)
#
# `up` builds the binaries first (tests/k8s/build.sh) and writes:
#   DIR/kubeconfig       an administrator (system:masters)
#   DIR/kubeconfig-kcm   system:kube-controller-manager, as kubeadm's
#                        controller manager authenticates
#   DIR/kubeconfig-node  system:node:kcm-node, for node/node.sh's kubelet
#   DIR/audit.log        every write, as JSON lines
#   DIR/pids             the processes started, etcd's first, kube-apiserver's second
#   DIR/etcd-url         etcd's client URL (its /metrics is there)
#   DIR/logs/            each component's log
# and stops what it started if any of it fails to come up. `down` stops
# everything `up` started in DIR.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cmd=${1:-}
dir=${2:-}
if [ -z "$dir" ] || { [ "$cmd" != up ] && [ "$cmd" != down ]; }; then
  echo "usage: $0 up DIR [CONTROLLERS] | down DIR" >&2
  exit 2
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

down() {
  local pid
  [ -f "$dir/pids" ] || return 0
  # The last started first: kwok, controllers, then the API server, then etcd.
  for pid in $(tac "$dir/pids"); do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in $(tac "$dir/pids"); do
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$dir/pids"
}

if [ "$cmd" = down ]; then
  down
  exit 0
fi

controllers=${3:-"*,-deployment,-replicaset"}
bin=$(bash "$here/build.sh")
[ -f "$dir/pids" ] && down
trap 'rc=$?; [ $rc -eq 0 ] || { echo "k8s: up failed; logs in $dir/logs" >&2; down; }' EXIT
mkdir -p "$dir/logs" "$dir/pki"
rm -rf "$dir/etcd"

# N ports free on loopback now, all different: each is held until all are
# picked, as a port just let go of may be handed out again at once.
free_ports() {
  python3 -c 'import socket, sys
held = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in held:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in held))' "$1"
}

# --- certificates and credentials ---------------------------------------------------------
pki=$dir/pki
openssl_quiet() { openssl "$@" >/dev/null 2>&1; }
openssl_quiet req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=kcm-e2e-ca" -keyout "$pki/ca.key" -out "$pki/ca.crt"
openssl_quiet req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=kube-apiserver" \
  -keyout "$pki/apiserver.key" -out "$pki/apiserver.csr"
printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' >"$pki/san.ext"
openssl_quiet x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
  -CAcreateserial -days 2 -extfile "$pki/san.ext" -out "$pki/apiserver.crt"
# kube-apiserver's client certificate for kubelets (logs, exec), as kubeadm's.
openssl_quiet req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -subj "/O=system:masters/CN=kube-apiserver-kubelet-client" \
  -keyout "$pki/kubelet-client.key" -out "$pki/kubelet-client.csr"
openssl_quiet x509 -req -in "$pki/kubelet-client.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" \
  -CAcreateserial -days 2 -out "$pki/kubelet-client.crt"
openssl_quiet genrsa -out "$pki/sa.key" 2048
openssl_quiet rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub"
token() { head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
admin=$(token)
kcm=$(token)
sched=$(token)
node=$(token)
{
  echo "$admin,kcm-e2e-admin,kcm-e2e-admin,\"system:masters\""
  echo "$kcm,system:kube-controller-manager,system:kube-controller-manager"
  echo "$sched,system:kube-scheduler,system:kube-scheduler"
  echo "$node,system:node:kcm-node,system:node:kcm-node,\"system:nodes\""
} >"$pki/tokens.csv"
chmod 600 "$pki"/*.key "$pki/tokens.csv"

cat >"$dir/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: None
    verbs: [get, list, watch]
  - level: Metadata
EOF

# --- etcd and kube-apiserver ---------------------------------------------------------------
read -r etcd_port peer_port api_port kwok_port < <(free_ports 4)
"$bin/etcd" --name kcm-e2e --data-dir "$dir/etcd" --unsafe-no-fsync \
  --listen-client-urls "http://127.0.0.1:$etcd_port" \
  --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "kcm-e2e=http://127.0.0.1:$peer_port" \
  >"$dir/logs/etcd.log" 2>&1 &
echo $! >>"$dir/pids"

issuer=https://kubernetes.default.svc.cluster.local
# A kubelet (logs, exec) is reached at its node's InternalIP: the test
# node's name (node/node.sh) resolves nowhere.
"$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --token-auth-file "$pki/tokens.csv" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged \
  --kubelet-client-certificate "$pki/kubelet-client.crt" \
  --kubelet-client-key "$pki/kubelet-client.key" \
  --kubelet-preferred-address-types InternalIP,Hostname \
  --service-account-issuer "$issuer" --api-audiences "$issuer" \
  --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
  --service-cluster-ip-range 10.96.0.0/16 --endpoint-reconciler-type none \
  --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/audit.log" \
  --audit-log-format json --audit-log-mode blocking \
  --profiling=false \
  >"$dir/logs/kube-apiserver.log" 2>&1 &
api_pid=$!
echo $api_pid >>"$dir/pids"

kubeconfig() { # FILE TOKEN
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
  - name: kcm-e2e
    cluster:
      server: https://127.0.0.1:$api_port
      certificate-authority: $pki/ca.crt
contexts:
  - name: kcm-e2e
    context:
      cluster: kcm-e2e
      user: user
current-context: kcm-e2e
users:
  - name: user
    user:
      token: $2
EOF
  chmod 600 "$1"
}
kubeconfig "$dir/kubeconfig" "$admin"
kubeconfig "$dir/kubeconfig-kcm" "$kcm"
kubeconfig "$dir/kubeconfig-scheduler" "$sched"
kubeconfig "$dir/kubeconfig-node" "$node"

k() { kubectl --kubeconfig "$dir/kubeconfig" "$@"; }
for _ in $(seq 600); do
  [ "$(k get --raw /readyz 2>/dev/null)" = ok ] && break
  kill -0 "$api_pid" 2>/dev/null || break
  sleep 0.1
done
if [ "$(k get --raw /readyz 2>/dev/null)" != ok ]; then
  echo "k8s: kube-apiserver is not ready:" >&2
  grep -E '^[EF][0-9]{4}' "$dir/logs/kube-apiserver.log" | tail -3 >&2 || true
  exit 1
fi

echo "http://127.0.0.1:$etcd_port" >"$dir/etcd-url"
if [ "$controllers" = none ]; then
  echo "k8s: kube-apiserver $(basename "$bin") alone up on https://127.0.0.1:$api_port;" \
    "KUBECONFIG=$dir/kubeconfig" >&2
  exit 0
fi

# --- controllers, scheduler, nodes ---------------------------------------------------------
"$bin/kube-scheduler" --kubeconfig "$dir/kubeconfig-scheduler" --leader-elect=false \
  --secure-port 0 >"$dir/logs/kube-scheduler.log" 2>&1 &
echo $! >>"$dir/pids"
"$bin/kube-controller-manager" --kubeconfig "$dir/kubeconfig-kcm" --leader-elect=false \
  --secure-port 0 --use-service-account-credentials --controllers "$controllers" \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  >"$dir/logs/kube-controller-manager.log" 2>&1 &
echo $! >>"$dir/pids"
kwok_nodes=${KCM_K8S_KWOK_NODES:-3}
if [ "$kwok_nodes" -gt 0 ]; then
  "$bin/kwokstages" >"$dir/kwok.yaml"
  "$bin/kwok" --kubeconfig "$dir/kubeconfig" --config "$dir/kwok.yaml" \
    --manage-all-nodes=false --manage-nodes-with-label-selector type=kwok \
    --server-address "127.0.0.1:$kwok_port" --cidr 10.244.0.0/16 --node-ip 127.0.0.1 \
    --node-lease-duration-seconds 40 \
    >"$dir/logs/kwok.log" 2>&1 &
  echo $! >>"$dir/pids"
  for n in $(seq "$kwok_nodes"); do
    k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$n
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-$n, kubernetes.io/os: linux}
  annotations: {node.alpha.kubernetes.io/ttl: "0"}
spec: {}
EOF
  done
  k wait --for=condition=Ready node -l type=kwok --timeout=60s >/dev/null
fi
# The namespaces' default ServiceAccounts, which pods need, come from
# kube-controller-manager's serviceaccount controller.
for _ in $(seq 300); do
  k -n default get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.1
done
k -n default get serviceaccount default >/dev/null
echo "k8s: Kubernetes $(basename "$bin") up on https://127.0.0.1:$api_port; KUBECONFIG=$dir/kubeconfig" >&2
