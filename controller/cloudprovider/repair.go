package cloudprovider

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

// defaultRepairToleration is how long a node may report NotReady, or nothing, before it is
// replaced: long enough for a kubelet restart or a short network partition to heal.
const defaultRepairToleration = 10 * time.Minute

// repairTolerationOverride is empty in every build but the end-to-end suite's repair one,
// which links a shorter toleration (go build -ldflags "-X <this package>.repairTolerationOverride=30s")
// so that a scenario waits seconds, not ten minutes. It is not a setting: users keep 10 min.
var repairTolerationOverride string

// repairToleration is parsed once, at start. A bad linked value is a broken build, not a user
// mistake: the binary refuses to start rather than run with a toleration nobody asked for.
var repairToleration = mustRepairToleration(repairTolerationOverride)

func parseRepairToleration(linked string) (time.Duration, error) {
	if linked == "" {
		return defaultRepairToleration, nil
	}
	d, err := time.ParseDuration(linked)
	if err != nil {
		return 0, fmt.Errorf("linked repair toleration %q: %w", linked, err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("linked repair toleration %q: must be positive", linked)
	}
	return d, nil
}

func mustRepairToleration(linked string) time.Duration {
	d, err := parseRepairToleration(linked)
	if err != nil {
		panic(err)
	}
	return d
}

// RepairPolicies implements cloudprovider.CloudProvider. A node whose kubelet reports
// NotReady or stops reporting for the toleration (10 minutes) is replaced; CKE offers no
// in-place repair.
func (c *CloudProvider) RepairPolicies() []cloudprovider.RepairPolicy {
	return []cloudprovider.RepairPolicy{
		{
			// The set's single fallback policy, as core requires.
			ConditionType:      corev1.NodeReady,
			ConditionStatus:    corev1.ConditionFalse,
			TolerationDuration: repairToleration,
			Action:             cloudprovider.ReplaceNode,
		},
		{
			ConditionType:      corev1.NodeReady,
			ConditionStatus:    corev1.ConditionUnknown,
			ReasonRegex:        ".*",
			TolerationDuration: repairToleration,
			Action:             cloudprovider.ReplaceNode,
		},
	}
}
