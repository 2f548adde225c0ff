package cloudprovider

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
)

// RepairPolicies implements cloudprovider.CloudProvider. A node whose kubelet reports
// NotReady or stops reporting for 10 minutes is replaced; CKE offers no in-place repair.
func (c *CloudProvider) RepairPolicies() []cloudprovider.RepairPolicy {
	return []cloudprovider.RepairPolicy{
		{
			// The set's single fallback policy, as core requires.
			ConditionType:      corev1.NodeReady,
			ConditionStatus:    corev1.ConditionFalse,
			TolerationDuration: 10 * time.Minute,
			Action:             cloudprovider.ReplaceNode,
		},
		{
			ConditionType:      corev1.NodeReady,
			ConditionStatus:    corev1.ConditionUnknown,
			ReasonRegex:        ".*",
			TolerationDuration: 10 * time.Minute,
			Action:             cloudprovider.ReplaceNode,
		},
	}
}
