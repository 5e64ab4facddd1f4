// kwokstages prints the Stages kwok runs the fake nodes and pods of
// tests/k8s/cluster.sh by: kwok's own defaults (nodes initialized and
// heartbeating through their Leases; pods ready at once, completed, and
// deleted), except that a pod with a container image whose name holds
// "bad", or whose tag is 404, never starts and waits in ImagePullBackOff, as
// an image that cannot be pulled leaves it (and as the project's local API
// server's kubelet does).
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

func stage(raw string) v1alpha1.Stage {
	var s v1alpha1.Stage
	if err := yaml.UnmarshalStrict([]byte(raw), &s); err != nil {
		fmt.Fprintf(os.Stderr, "kwokstages: %v\n", err)
		os.Exit(1)
	}
	return s
}

func main() {
	ready := stage(podfast.DefaultPodReady)
	ready.Spec.Selector.MatchExpressions = append(ready.Spec.Selector.MatchExpressions,
		v1alpha1.MatchExpression{Key: unpullable, Operator: v1alpha1.SelectorOpNotIn,
			Values: []string{"true"}})
	pull := v1alpha1.Stage{
		TypeMeta:   ready.TypeMeta,
		ObjectMeta: ready.ObjectMeta,
		Spec: v1alpha1.StageSpec{
			ResourceRef: ready.Spec.ResourceRef,
			Selector: &v1alpha1.StageSelector{MatchExpressions: []v1alpha1.MatchExpression{
				{Key: ".metadata.deletionTimestamp", Operator: v1alpha1.SelectorOpDoesNotExist},
				{Key: ".status.phase", Operator: v1alpha1.SelectorOpIn, Values: []string{"Pending"}},
				{Key: ".status.containerStatuses", Operator: v1alpha1.SelectorOpDoesNotExist},
				{Key: unpullable, Operator: v1alpha1.SelectorOpIn, Values: []string{"true"}},
			}},
			Next: &v1alpha1.StageNext{StatusTemplate: `containerStatuses:
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
`},
		},
	}
	pull.Name = "pod-image-pull-backoff"
	stages := []v1alpha1.Stage{stage(fast.DefaultNodeInit), stage(heartbeat.DefaultNodeHeartbeatWithLease),
		ready, pull, stage(podfast.DefaultPodComplete), stage(podfast.DefaultPodDelete)}
	for _, s := range stages {
		out, err := yaml.Marshal(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kwokstages: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("---\n%s", out)
	}
}
