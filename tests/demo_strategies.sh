# The release patterns of manifests/examples/strategies, step by step, for
# tests/demo.sh (sourced: it brings kubectl, $root and $ns). Each pattern
# runs in a namespace of its own and prints, after each step, the pods of
# app my-app by version and which of them the Service my-app picks.

strategies=$root/manifests/examples/strategies

step() { # what, then the command
  echo
  echo "== $1"
  shift
  local cmd="$*"
  echo "   \$ ${cmd//$root\//}"
  "$@" 2>&1 | sed 's/^/   /'
}

until_ok() { # what is awaited, then a command that succeeds once it holds (30 s at most)
  local what=$1 i
  shift
  for ((i = 0; i < 300; i++)); do
    "$@" && return 0
    sleep 0.1
  done
  echo "demo: timed out after 30 s waiting for $what" >&2
  exit 1
}

none_terminating() {
  [ -z "$(kubectl get pods -l app=my-app -o jsonpath='{.items[*].metadata.deletionTimestamp}')" ]
}

all_ready() {
  [[ "$(kubectl get pods -l app=my-app -o jsonpath='{.items[*].status.conditions[?(@.type=="Ready")].status}')" != *False* ]]
}

none_left() { # label selector: no ReplicaSet or pod has it
  [ -z "$(kubectl get rs,pods -l "$1" -o name)" ]
}

canary_asked() { # my-app's v2 ReplicaSet asks for a pod
  [ "$(kubectl get rs -l app=my-app,version=v2.0.0 -o jsonpath='{.items[*].spec.replicas}')" = 1 ]
}

by_version() { # label selector: "v1.0.0 3/3 ready, v2.0.0 1/1 ready" (terminating pods left out)
  local out
  out=$(kubectl get pods -l "$1" -o jsonpath='{range .items[*]}{.metadata.labels.version} {.status.conditions[?(@.type=="Ready")].status} {.metadata.deletionTimestamp}{"\n"}{end}' |
    awk '$3 == "" { n[$1]++; if ($2 == "True") r[$1]++ }
         END { for (v in n) printf "%s %d/%d ready\n", v, r[v], n[v] }' | sort | paste -sd,)
  out=${out//,/, }
  echo "${out:-none}"
}

pods() { # kubectl get pods -L version, then the pods by version and the Service's
  local sel
  until_ok "the pods of my-app to finish terminating" none_terminating
  until_ok "every pod of my-app to be ready" all_ready
  echo "   \$ kubectl get pods -L version"
  kubectl get pods -L version | sed 's/^/   /'
  echo "   pods by version: $(by_version app=my-app)"
  if kubectl get service my-app >/dev/null 2>&1; then
    sel=$(kubectl get service my-app -o go-template='{{range $k, $v := .spec.selector}}{{$k}}={{$v}},{{end}}')
    sel=${sel%,}
    echo "   behind Service my-app ($sel): $(by_version "$sel")"
  fi
}

rolled() { # deployment: wait for it, printing kubectl's progress lines
  kubectl rollout status "deployment/$1" --timeout=120s | sed 's/^/   /'
}

strategy() { # pattern
  local d=${1%-fast} v1=3
  d=${d/canary-native/canary/native}
  ns=demo-$1
  echo
  echo "#### $1 (namespace $ns; manifests/examples/strategies/$d)"
  d=$strategies/$d
  command kubectl --cache-dir "$demo/kubectl-cache" create namespace "$ns" >/dev/null
  case $1 in
    recreate | ramped | ramped-fast)
      [ "$1" = recreate ] || v1=10
      step "v1: $v1 replicas, and a Service" kubectl apply -f "$d/app-v1.yaml" -f "$d/service.yaml"
      rolled my-app
      pods
      local v2=app-v2.yaml
      [ "$1" = ramped-fast ] && v2=app-v2-fast.yaml
      step "v2 ($v2)" kubectl apply -f "$d/$v2"
      rolled my-app
      pods
      step "what kcm did" kubectl get events --field-selector reason=ScalingReplicaSet \
        --sort-by=.lastTimestamp -o custom-columns=REASON:.reason,MESSAGE:.message
      ;;
    blue-green)
      step "blue: v1, 10 replicas, and the Service selecting version v1.0.0" \
        kubectl apply -f "$d/app-v1.yaml" -f "$d/service.yaml"
      rolled my-app-v1
      pods
      step "green: v2 beside it, 10 replicas; the Service still selects blue" kubectl apply -f "$d/app-v2.yaml"
      rolled my-app-v2
      pods
      step "switch the Service to green" \
        kubectl patch service my-app -p '{"spec":{"selector":{"version":"v2.0.0"}}}'
      pods
      step "green is good: remove blue" kubectl delete deployment my-app-v1
      until_ok "the ReplicaSets and pods of v1 to go" none_left app=my-app,version=v1.0.0
      pods
      ;;
    canary)
      step "v1: 10 replicas behind a Service selecting app my-app" \
        kubectl apply -f "$d/app-v1.yaml" -f "$d/service.yaml"
      rolled my-app-v1
      pods
      step "the canary: a second Deployment, v2, 1 replica (1 pod in 11)" kubectl apply -f "$d/app-v2.yaml"
      rolled my-app-v2
      pods
      step "v2 is good: scale it to 10" kubectl scale deployment my-app-v2 --replicas=10
      rolled my-app-v2
      pods
      step "remove v1" kubectl delete deployment my-app-v1
      until_ok "the ReplicaSets and pods of v1 to go" none_left app=my-app,version=v1.0.0
      pods
      ;;
    canary-native)
      step "v1: one Deployment, 5 replicas, maxSurge 1, maxUnavailable 0, minReadySeconds 5" \
        kubectl apply -f "$d/app-v1.yaml" -f "$d/service.yaml"
      rolled my-app
      pods
      step "v2, paused as soon as its first pod is asked for" kubectl apply -f "$d/app-v2.yaml"
      until_ok "a ReplicaSet of v2 with one replica" canary_asked
      step "hold the rollout there" kubectl rollout pause deployment/my-app
      pods
      step "v2 is good: resume (kubectl rollout undo, after resume, would abort it)" \
        kubectl rollout resume deployment/my-app
      rolled my-app
      pods
      step "the history" kubectl rollout history deployment/my-app
      ;;
  esac
}
