package inspect

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	cp "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
)

// Status is what status reports: the provider as the cluster shows it.
type Status struct {
	Namespace string `json:"namespace"`
	// Leader is who holds the lease and what it runs.
	Leader      string          `json:"leader"`
	NodeClasses []ClassStatus   `json:"nodeClasses"`
	Quota       string          `json:"quota"`
	Prices      string          `json:"prices"`
	Overrides   string          `json:"overrides"`
	Preflight   string          `json:"preflight"`
	NodePools   []PoolStatus    `json:"nodePools"`
	Pending     []PendingStatus `json:"pending"`
	// Unreadable are the reads that failed, by what they read.
	Unreadable map[string]string `json:"unreadable,omitempty"`
}

// ClassStatus is a CleverNodeClass and its conditions, each "Type=Status Reason: message".
type ClassStatus struct {
	Name       string   `json:"name"`
	Conditions []string `json:"conditions"`
}

// PoolStatus is a NodePool, its nodes by flavor and what they cost.
type PoolStatus struct {
	Name string `json:"name"`
	// Nodes counts the pool's nodes by flavor.
	Nodes map[string]int `json:"nodes"`
	// CostHourly is the sum of its nodes' flavor prices, in EUR per hour.
	CostHourly float64 `json:"costHourly"`
	// Unpriced are its nodes whose flavor the catalogue does not price.
	Unpriced []string `json:"unpriced,omitempty"`
	Limits   string   `json:"limits,omitempty"`
}

// PendingStatus is a pod waiting for a node, and the provider's or core's latest word on it.
type PendingStatus struct {
	Pod     string `json:"pod"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// At is when that was said.
	At time.Time `json:"at,omitzero"`
}

// waitingFresh is how long a WaitingOnQuota event is taken as the reason over core's later
// events: the provider repeats it every 5 minutes to a pod still waiting.
const waitingFresh = 10 * time.Minute

// BuildStatus builds the report from what s read; pending are the pods waiting for a node.
func BuildStatus(s *State) Status {
	st := Status{Namespace: s.Namespace, Leader: leader(s), Quota: quotaText(s), Prices: prices(s), Overrides: overrides(s), Preflight: preflightText(s)}
	for _, nc := range s.NodeClasses {
		cs := ClassStatus{Name: nc.Name}
		for _, c := range nc.Status.Conditions {
			line := fmt.Sprintf("%s=%s", c.Type, c.Status)
			if c.Reason != "" {
				line += " " + c.Reason
			}
			if c.Message != "" {
				line += ": " + c.Message
			}
			cs.Conditions = append(cs.Conditions, line)
		}
		st.NodeClasses = append(st.NodeClasses, cs)
	}
	for _, p := range s.NodePools {
		ps := PoolStatus{Name: p.Name, Nodes: map[string]int{}}
		for _, n := range s.Nodes {
			if n.Labels[karpv1.NodePoolLabelKey] != p.Name {
				continue
			}
			flavor := n.Labels[corev1.LabelInstanceTypeStable]
			ps.Nodes[flavor]++
			if price, ok := s.price(flavor); ok {
				ps.CostHourly += price
			} else {
				ps.Unpriced = append(ps.Unpriced, n.Name)
			}
		}
		// Prices have 4 decimals, as Clever Cloud publishes them: so has their sum.
		ps.CostHourly = math.Round(ps.CostHourly*1e4) / 1e4
		if len(p.Spec.Limits) > 0 {
			var ls []string
			for _, r := range slices.Sorted(maps.Keys(p.Spec.Limits)) {
				used := p.Status.Resources[r]
				limit := p.Spec.Limits[r]
				ls = append(ls, fmt.Sprintf("%s %s of %s", r, used.String(), limit.String()))
			}
			ps.Limits = strings.Join(ls, ", ")
		}
		st.NodePools = append(st.NodePools, ps)
	}
	for i := range s.Pods {
		pod := &s.Pods[i]
		r := pendingReason(s, pod)
		r.Pod = pod.Namespace + "/" + pod.Name
		st.Pending = append(st.Pending, r)
	}
	if len(s.Errors) > 0 {
		st.Unreadable = map[string]string{}
		for k, err := range s.Errors {
			st.Unreadable[k] = err.Error()
		}
	}
	return st
}

// pendingReason is the latest word on a pod that waits: the provider's WaitingOnQuota while
// fresh, else Karpenter's latest (FailedScheduling, Nominated), else the scheduler's.
func pendingReason(s *State, pod *corev1.Pod) PendingStatus {
	evs := s.eventsOf("Pod", pod.Namespace, pod.Name)
	for _, ev := range evs {
		if ev.Reason == cp.ReasonWaitingOnQuota && s.Now.Sub(eventTime(ev)) < waitingFresh {
			return PendingStatus{Reason: ev.Reason, Message: ev.Message, At: eventTime(ev)}
		}
	}
	for _, scheduler := range []bool{false, true} {
		for _, ev := range evs {
			if (ev.Source.Component == "default-scheduler" || ev.ReportingController == "default-scheduler") == scheduler {
				return PendingStatus{Reason: ev.Reason, Message: ev.Message, At: eventTime(ev)}
			}
		}
	}
	return PendingStatus{}
}

func leader(s *State) string {
	if s.Lease == nil || s.Lease.Spec.HolderIdentity == nil || *s.Lease.Spec.HolderIdentity == "" {
		if err := s.Errors["lease "+s.Namespace+"/"+LeaseName]; err != nil {
			return "unknown: " + err.Error()
		}
		return fmt.Sprintf("none: no holder of Lease %s/%s (is the controller running, in this namespace?)", s.Namespace, LeaseName)
	}
	out := *s.Lease.Spec.HolderIdentity
	if r := s.Lease.Spec.RenewTime; r != nil {
		out += fmt.Sprintf(", renewed %s ago", s.Now.Sub(r.Time).Round(time.Second))
	}
	switch {
	case s.LeaderPod != nil:
		out += fmt.Sprintf("; pod %s on node %s, image %s", s.LeaderPod.Name, s.LeaderPod.Spec.NodeName, podImage(s.LeaderPod))
	case s.Deployment != nil && len(s.Deployment.Spec.Template.Spec.Containers) > 0:
		out += fmt.Sprintf("; not a pod of %s, so its version is unknown; Deployment %s runs image %s", s.Namespace, s.Deployment.Name, s.Deployment.Spec.Template.Spec.Containers[0].Image)
	default:
		out += fmt.Sprintf("; not a pod of %s, and no controller Deployment there: its version is unknown (a controller run out of the cluster?)", s.Namespace)
	}
	return out
}

// podImage is the image a pod runs, by digest when the kubelet reported it.
func podImage(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.ImageID != "" {
			return cs.Image + " (" + cs.ImageID + ")"
		}
	}
	if len(p.Spec.Containers) > 0 {
		return p.Spec.Containers[0].Image
	}
	return "unknown"
}

func quotaText(s *State) string {
	if s.Snapshot == nil {
		if err := s.Errors["ConfigMap "+s.Namespace+"/karpenter-clevercloud-quota"]; err != nil {
			return "unknown: " + err.Error()
		}
		return "no state saved yet (ConfigMap " + s.Namespace + "/karpenter-clevercloud-quota): the leader saves it once it has counted the quota"
	}
	out := strings.TrimRight(s.Summary, "\n")
	if s.Used != nil {
		out += fmt.Sprintf("\ncounted now: %s in use", *s.Used)
	}
	return out
}

// prices is the PricesCurrent condition, which every class carries alike.
func prices(s *State) string {
	for _, nc := range s.NodeClasses {
		if c := nc.StatusConditions().Get(v1alpha1.ConditionPricesCurrent); c != nil {
			return fmt.Sprintf("PricesCurrent=%s %s: %s (since %s)", c.Status, c.Reason, c.Message, stamp(c.LastTransitionTime.Time))
		}
	}
	if len(s.NodeClasses) == 0 {
		return "unknown: no CleverNodeClass to carry the PricesCurrent condition"
	}
	return "the embedded catalogue's: the price refresher is off (PRICING_REFRESH_ENABLED) or has not reported"
}

func overrides(s *State) string {
	o := s.Overrides
	switch {
	case o.Source == "" && s.Deployment == nil:
		return "unknown: no controller Deployment in " + s.Namespace + " to say which file it reads"
	case o.Source == "":
		return "none configured: the controller serves the embedded catalogue"
	case o.Err != nil:
		return fmt.Sprintf("refused, the controller serves the embedded catalogue: %v", o.Err)
	}
	return fmt.Sprintf("in force: %s pins %s", o.Source, strings.Join(o.Flavors, ", "))
}

// preflightText is the leader's run-time preflight results, or where to read them.
func preflightText(s *State) string {
	if s.Metrics == nil {
		target := "pod/LEADER (the lease holder's name before its _)"
		if s.LeaderPod != nil {
			target = "pod/" + s.LeaderPod.Name
		}
		why := "the leader is not a pod of " + s.Namespace
		if err := s.Errors["the leader's metrics"]; err != nil {
			why = err.Error()
		}
		return fmt.Sprintf("not readable through the apiserver (%s); on the leader: kubectl -n %s port-forward %s 8080, then curl -s localhost:8080/metrics | grep karpenter_clevercloud_preflight_check", why, s.Namespace, target)
	}
	if len(s.Metrics.Preflight) == 0 {
		return "no run yet (the leader runs the checks at start, then every " + preflight.RuntimePeriod.String() + ")"
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s.Metrics.Preflight)) {
		out = append(out, k+": "+s.Metrics.Preflight[k])
	}
	return strings.Join(out, ", ")
}
