package cloudprovider

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// Event reasons are part of the product's interface: users alert on them. Do not rename.
const (
	ReasonQuotaExceeded      = "NodeGroupQuotaExceeded"
	ReasonVanished           = "NodeGroupVanished"
	ReasonAcceptanceTimedOut = "NodeGroupAcceptanceTimedOut"
	ReasonDeleteRefused      = "NodeGroupDeleteRefused"
	ReasonQuotaLimited       = "QuotaLimitsFlavors"
)

func quotaLimited(pool *karpv1.NodePool, blocked []string, headroom quota.Usage) events.Event {
	return events.Event{
		InvolvedObject: pool,
		Type:           corev1.EventTypeNormal,
		Reason:         ReasonQuotaLimited,
		Message: fmt.Sprintf("Organisation quota headroom is %s (or a flavor was just refused): flavors %s are unavailable until capacity frees",
			headroomString(headroom), strings.Join(blocked, ", ")),
		DedupeValues:  []string{pool.Name, strings.Join(blocked, ",")},
		DedupeTimeout: 5 * time.Minute,
	}
}

func headroomString(h quota.Usage) string {
	cpu, gb := fmt.Sprint(h.CPU), fmt.Sprint(h.GB)
	if h.CPU >= 1<<40 {
		cpu = "unknown"
	}
	if h.GB >= 1<<40 {
		gb = "unknown"
	}
	return cpu + " vCPU / " + gb + " GB"
}

func quotaExceeded(claim *karpv1.NodeClaim, group, flavor, message string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonQuotaExceeded,
		Message:        fmt.Sprintf("Organisation quota refused NodeGroup %s (flavor %s): %s", group, flavor, message),
		DedupeValues:   []string{string(claim.UID)},
	}
}

func nodeGroupVanished(claim *karpv1.NodeClaim, group string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonVanished,
		Message:        fmt.Sprintf("NodeGroup %s disappeared upstream before its node registered", group),
		DedupeValues:   []string{string(claim.UID)},
	}
}

func acceptanceTimedOut(claim *karpv1.NodeClaim, group string, timeout time.Duration) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonAcceptanceTimedOut,
		Message:        fmt.Sprintf("NodeGroup %s got no verdict from the node-group operator within %s; waiting for the node to register", group, timeout),
		DedupeValues:   []string{string(claim.UID)},
	}
}

func deleteRefused(claim *karpv1.NodeClaim, group string) events.Event {
	return events.Event{
		InvolvedObject: claim,
		Type:           corev1.EventTypeWarning,
		Reason:         ReasonDeleteRefused,
		Message:        fmt.Sprintf("Refusing to delete NodeGroup %s: it carries no owner reference to this NodeClaim", group),
		DedupeValues:   []string{string(claim.UID)},
	}
}
