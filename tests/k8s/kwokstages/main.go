// kwokstages prints the Stages kwok runs the fake nodes and pods of
// tests/k8s/cluster.sh by: kwok's own defaults (nodes initialized and
// heartbeating through their Leases; pods ready at once, completed, and
// deleted), except that a pod with a container image whose name holds
// "bad", or whose tag is 404, never starts and waits in ImagePullBackOff, as
// an image that cannot be pulled leaves it, and one whose image holds
// "crashloop" runs but never gets ready, its containers in CrashLoopBackOff
// after three restarts (both as the project's local API server's kubelet
// does).
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/kwok/kustomize/stage/node/fast"
	heartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"
)

// A pod of an image that cannot be pulled: true when a container's image
// names "bad" (the project's tests) or has the tag 404 (upstream's specs).
const unpullable = `[.spec.containers.[].image | (contains("bad") or endswith(":404"))] | any`

// A pod of an image that exits soon after each start.
const crashing = `[.spec.containers.[].image | contains("crashloop")] | any`

func stage(raw string) v1alpha1.Stage {
	var s v1alpha1.Stage
	if err := yaml.UnmarshalStrict([]byte(raw), &s); err != nil {
		fmt.Fprintf(os.Stderr, "kwokstages: %v\n", err)
		os.Exit(1)
	}
	return s
}

// A stage like ready's that takes a pod kwok has not started yet (Pending,
// no container statuses) and matching each of which to the status of
// template.
func held(ready v1alpha1.Stage, name, template string,
	which ...v1alpha1.MatchExpression) v1alpha1.Stage {
	s := v1alpha1.Stage{
		TypeMeta:   ready.TypeMeta,
		ObjectMeta: ready.ObjectMeta,
		Spec: v1alpha1.StageSpec{
			ResourceRef: ready.Spec.ResourceRef,
			Selector: &v1alpha1.StageSelector{MatchExpressions: []v1alpha1.MatchExpression{
				{Key: ".metadata.deletionTimestamp", Operator: v1alpha1.SelectorOpDoesNotExist},
				{Key: ".status.phase", Operator: v1alpha1.SelectorOpIn, Values: []string{"Pending"}},
				{Key: ".status.containerStatuses", Operator: v1alpha1.SelectorOpDoesNotExist},
			}},
			Next: &v1alpha1.StageNext{StatusTemplate: template},
		},
	}
	s.Spec.Selector.MatchExpressions = append(s.Spec.Selector.MatchExpressions, which...)
	s.Name = name
	return s
}

func main() {
	ready := stage(podfast.DefaultPodReady)
	ready.Spec.Selector.MatchExpressions = append(ready.Spec.Selector.MatchExpressions,
		v1alpha1.MatchExpression{Key: unpullable, Operator: v1alpha1.SelectorOpNotIn,
			Values: []string{"true"}},
		v1alpha1.MatchExpression{Key: crashing, Operator: v1alpha1.SelectorOpNotIn,
			Values: []string{"true"}})
	pull := held(ready, "pod-image-pull-backoff", `containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  state:
    waiting:
      reason: ImagePullBackOff
      message: {{ printf "Back-off pulling image %q" .image | Quote }}
{{ end }}
phase: Pending
`, v1alpha1.MatchExpression{Key: unpullable, Operator: v1alpha1.SelectorOpIn,
		Values: []string{"true"}})
	loop := held(ready, "pod-crash-loop-backoff", `{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 3
  lastState:
    terminated:
      exitCode: 1
      reason: Error
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
  state:
    waiting:
      reason: CrashLoopBackOff
      message: {{ printf "back-off 40s restarting failed container=%s" .name | Quote }}
{{ end }}
phase: Running
`, v1alpha1.MatchExpression{Key: unpullable, Operator: v1alpha1.SelectorOpNotIn,
		Values: []string{"true"}},
		v1alpha1.MatchExpression{Key: crashing, Operator: v1alpha1.SelectorOpIn,
			Values: []string{"true"}})
	stages := []v1alpha1.Stage{stage(fast.DefaultNodeInit), stage(heartbeat.DefaultNodeHeartbeatWithLease),
		ready, pull, loop, stage(podfast.DefaultPodComplete), stage(podfast.DefaultPodDelete)}
	for _, s := range stages {
		out, err := yaml.Marshal(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kwokstages: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("---\n%s", out)
	}
}
