#!/usr/bin/env bash
# The demo: build kcm, start the local API server with its fake kubelet,
# start kcm against it, then either apply the example Deployment and
# ReplicaSet and show what the API server holds, or walk one release pattern
# of manifests/examples/strategies step by step, printing the pods by
# version after each step. On a terminal it then keeps both running until
# Enter.
#
#   bash tests/demo.sh [PATTERN]
#
# PATTERN: recreate, ramped, ramped-fast, blue-green, canary, canary-native,
# or all (each in turn, a namespace each). KCM_BIN=path runs that kcm binary
# instead of building one. KCM_DEMO_API_PORT and KCM_DEMO_SECURE_PORT choose
# the ports of the local API server and of kcm's secure port on 127.0.0.1
# (default: free ones).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KCM_BUILD_DIR:-$root/build}
demo=$build/demo
patterns=(recreate ramped ramped-fast blue-green canary canary-native)
pattern=${1:-}
if [ -n "$pattern" ] && [[ " ${patterns[*]} all " != *" $pattern "* ]]; then
  echo "demo: unknown pattern '$pattern'; one of: ${patterns[*]} all" >&2
  exit 2
fi

for port in "${KCM_DEMO_API_PORT:-0}" "${KCM_DEMO_SECURE_PORT:-0}"; do
  if ! [[ $port =~ ^[0-9]+$ ]] || ((port > 65535)); then
    echo "demo: '$port' is not a port (KCM_DEMO_API_PORT, KCM_DEMO_SECURE_PORT: 1-65535)" >&2
    exit 2
  fi
done

if [ -n "${KCM_BIN:-}" ]; then
  kcm=$KCM_BIN
else
  echo "== building kcm (tests/setup.sh kcm: the packages it needs, then the build)"
  bash "$root/tests/setup.sh" kcm | sed -u 's/^/   /'
  kcm=$build/kcm
fi
rm -rf "$demo"
mkdir -p "$demo"

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# shellcheck source=tests/wait_for_line.sh
source "$root/tests/wait_for_line.sh"

echo "== starting the local API server with its fake kubelet"
python3 "$root/tests/sim/apiserver.py" --dir "$demo/apiserver" --kubelet \
  --port "${KCM_DEMO_API_PORT:-0}" \
  >"$demo/apiserver.log" 2>&1 &
pids+=($!)
wait_for_line "$demo/apiserver.log" '^READY' 20
export KUBECONFIG=$demo/apiserver/kubeconfig
ns=""
kubectl() { command kubectl --cache-dir "$demo/kubectl-cache" ${ns:+-n "$ns"} "$@"; }
echo "   $(cat "$demo/apiserver.log")"

echo "== starting kcm --kubeconfig $KUBECONFIG"
secure_port=${KCM_DEMO_SECURE_PORT:-0}
if [ "$secure_port" = 0 ]; then
  secure_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
"$kcm" --kubeconfig "$KUBECONFIG" --bind-address=127.0.0.1 --secure-port="$secure_port" \
  >"$demo/kcm.log" 2>&1 &
pids+=($!)
wait_for_line "$demo/kcm.log" 'connected to the API server' 20
sed 's/^/   /' "$demo/kcm.log"

if [ -n "$pattern" ]; then
  # shellcheck source=tests/demo_strategies.sh
  source "$root/tests/demo_strategies.sh"
  if [ "$pattern" = all ]; then
    for p in "${patterns[@]}"; do strategy "$p"; done
  else
    strategy "$pattern"
  fi
else
  echo "== kubectl apply -f manifests/examples/nginx-deployment.yaml"
  kubectl apply -f "$root/manifests/examples/nginx-deployment.yaml"
  echo "== kubectl apply -f manifests/examples/frontend-replicaset.yaml"
  kubectl apply -f "$root/manifests/examples/frontend-replicaset.yaml"
  echo "== kubectl rollout status deployment/nginx-deployment"
  kubectl rollout status deployment/nginx-deployment --timeout=60s
  echo "== kubectl set image deployment/nginx-deployment nginx=nginx:1.9.1"
  kubectl set image deployment/nginx-deployment nginx=nginx:1.9.1
  kubectl rollout status deployment/nginx-deployment --timeout=60s
  echo "== waiting for the frontend ReplicaSet's 3 pods to be ready"
  for ((i = 0; i < 300; i++)); do
    ready=$(kubectl get rs frontend -o jsonpath='{.status.readyReplicas}')
    [ "$ready" = 3 ] && break
    sleep 0.1
  done
  if [ "$ready" != 3 ]; then
    echo "demo: the frontend ReplicaSet has ${ready:-0} of 3 ready pods" >&2
    exit 1
  fi

  echo "== kubectl get deploy,rs,pods"
  kubectl get deploy,rs,pods
  echo "== kubectl rollout history deployment/nginx-deployment"
  kubectl rollout history deployment/nginx-deployment
  echo "== kubectl describe deployment nginx-deployment (events)"
  kubectl describe deployment nginx-deployment | sed -n '/^Events:/,$p'
  echo "== curl -k https://127.0.0.1:$secure_port/readyz?verbose (kcm's secure port)"
  curl -sk "https://127.0.0.1:$secure_port/readyz?verbose" | sed 's/^/   /'
  echo
  echo "kcm's Deployment controller rolled nginx-deployment out, then rolled it"
  echo "to nginx:1.9.1 (two ReplicaSets, revisions 1 and 2); its ReplicaSet"
  echo "controller created the pods of both and of the frontend ReplicaSet."

fi

if [ -t 0 ]; then
  echo
  echo "The local API server and kcm keep running. In another terminal:"
  echo "  export KUBECONFIG=$KUBECONFIG"
  echo "  kubectl get deploy,rs,pods"
  echo "kcm's log: $demo/kcm.log"
  read -r -p "Press Enter to stop them. " _
fi
