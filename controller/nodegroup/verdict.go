package nodegroup

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// Outcome is what a NodeGroup's status says about its launch. The operator's first status
// write (about 1 s after creation) is already its decision: Launched (phase Creating) or a
// refusal (QuotaExceeded); the VM is built later (Synced, 38–58 s, minutes for outliers).
type Outcome int

const (
	// Pending: the operator has not decided yet.
	Pending Outcome = iota
	// Launched: the operator accepted the group and is building it (phase Creating).
	Launched
	// Synced: the group's VM is built (phase Synced or Ready=True). A cluster that has not been
	// upgraded writes this directly, without Creating first.
	Synced
	// QuotaExceeded: the organisation quota refused the group.
	QuotaExceeded
	// Refused: a ReconcileFailed reason the provider does not know, on a group the operator
	// never accepted: a refusal it cannot classify.
	Refused
	// Transient: a failure the operator retries on its own (UpstreamError, or an unknown
	// reason on a group it had accepted). Not a refusal: nothing is deleted for it.
	Transient
	// Vanished: the group disappeared (or started terminating).
	Vanished
	// TimedOut: no decision within the acceptance timeout (only Client.Wait reports it).
	TimedOut
)

var outcomeNames = [...]string{"Pending", "Launched", "Synced", "QuotaExceeded", "Refused", "Transient", "Vanished", "TimedOut"}

func (o Outcome) String() string {
	if int(o) < 0 || int(o) >= len(outcomeNames) {
		return "Unknown"
	}
	return outcomeNames[o]
}

// Decided says whether the outcome ends the wait for the operator's decision.
func (o Outcome) Decided() bool { return o != Pending }

// Refusal says whether the outcome means the group will never be built, so the launch has
// failed and Karpenter should plan again without it.
func (o Outcome) Refusal() bool { return o == QuotaExceeded || o == Refused }

// Verdict is what a NodeGroup's status says, read at one instant.
type Verdict struct {
	Outcome Outcome
	// Reason is the ReconcileFailed reason behind QuotaExceeded, Refused and Transient.
	Reason string
	// Message is the operator's message, or a description of the status when it gave none.
	Message string
	// Accepted says the operator accepted the group at some point: its status shows it
	// (Creating, Scaling, Synced, Ready, a node, an upstream ID) or the caller saw it earlier.
	// It is what tells a transient failure from a refusal when the reason is unknown.
	Accepted bool
	// Synced says the group's VM is built (phase Synced or Ready=True), whatever else the
	// status says (a transient failure may show beside it).
	Synced bool
}

// Judge reads a NodeGroup's status on its own, with no history.
func Judge(g *ngv1.NodeGroup) Verdict { return JudgeAfter(g, false) }

// JudgeAfter reads a NodeGroup's status knowing whether the caller saw the operator accept
// it earlier: the operator may drop the signs of acceptance from the status later, and an
// unknown failure on an accepted group is transient, not a refusal.
//
// Precedence: gone or terminating; a quota refusal (at any time: it wins over readiness, the
// operator may report both while it rolls back); UpstreamError; any other ReconcileFailed
// reason (transient if accepted, else an unclassified refusal); built; accepted; pending.
func JudgeAfter(g *ngv1.NodeGroup, acceptedBefore bool) Verdict {
	if g == nil || g.DeletionTimestamp != nil {
		return Verdict{Outcome: Vanished, Message: "the NodeGroup is gone or terminating"}
	}
	v := Verdict{Synced: synced(g)}
	v.Accepted = acceptedBefore || v.Synced || accepted(g)
	failed := g.Condition(ngv1.ConditionReconcileFailed)
	if failed != nil && failed.Status != metav1.ConditionTrue {
		failed = nil // a failure the operator has since recovered from
	}
	switch {
	case (failed != nil && failed.Reason == ngv1.ReasonQuotaExceeded) || g.Status.Phase == ngv1.PhaseQuotaExceeded:
		v.Outcome, v.Reason = QuotaExceeded, ngv1.ReasonQuotaExceeded
		v.Message = quotaMessage(g, failed)
	case (failed != nil && failed.Reason == ngv1.ReasonUpstreamError) || g.Status.Phase == ngv1.PhaseUpstreamError:
		v.Outcome, v.Reason = Transient, ngv1.ReasonUpstreamError
		v.Message = failureMessage(failed, "phase UpstreamError")
	case failed != nil:
		v.Outcome, v.Reason = Refused, failed.Reason
		if v.Accepted {
			v.Outcome = Transient
		}
		if v.Reason == "" {
			v.Reason = "Unknown"
		}
		v.Message = failureMessage(failed, "ReconcileFailed: "+v.Reason)
	case v.Synced:
		v.Outcome = Synced
	case v.Accepted:
		v.Outcome = Launched
	default:
		v.Outcome = Pending
	}
	return v
}

// synced: the operator reports the group built.
func synced(g *ngv1.NodeGroup) bool {
	if g.Status.Phase == ngv1.PhaseSynced {
		return true
	}
	ready := g.Condition(ngv1.ConditionReady)
	return ready != nil && ready.Status == metav1.ConditionTrue
}

// accepted: the status carries a sign that the operator took the group on. A
// ReconcileInProgress condition keeps its reason after it turns False, so it still counts.
func accepted(g *ngv1.NodeGroup) bool {
	switch g.Status.Phase {
	case ngv1.PhaseCreating, ngv1.PhaseScaling:
		return true
	}
	if p := g.Condition(ngv1.ConditionReconcileInProgress); p != nil && (p.Reason == ngv1.ReasonCreating || p.Reason == ngv1.ReasonScaling) {
		return true
	}
	return g.Status.NodeCount > 0 || g.Status.UpstreamID != ""
}

// quotaMessage is the refusal's message: empty on today's platform, "Quota exceeded: RAM max:
// limit = 40.0 GB | actual = 48.0 GB" on older clusters.
func quotaMessage(g *ngv1.NodeGroup, failed *metav1.Condition) string {
	if failed != nil && failed.Message != "" {
		return failed.Message
	}
	if failed == nil {
		if c := g.Condition(ngv1.ConditionReconcileFailed); c != nil && c.Message != "" {
			return c.Message
		}
	}
	if failed != nil && failed.Reason == ngv1.ReasonQuotaExceeded {
		return "ReconcileFailed: QuotaExceeded"
	}
	return "phase QuotaExceeded"
}

func failureMessage(failed *metav1.Condition, fallback string) string {
	if failed != nil && failed.Message != "" {
		return failed.Message
	}
	return fallback
}

// QuotaUsage is what a quota rejection message says, e.g.
// "Quota exceeded: RAM max: limit = 40.0 GB | actual = 48.0 GB".
type QuotaUsage struct {
	Resource string // "RAM" or "CPU", as quota.ResourceRAM and quota.ResourceCPU spell them
	Limit    float64
	Actual   float64
}

// ParseQuotaMessage extracts the resource, limit and actual use from a rejection message.
func ParseQuotaMessage(msg string) (QuotaUsage, bool) {
	_, rest, ok := strings.Cut(msg, "Quota exceeded:")
	if !ok {
		return QuotaUsage{}, false
	}
	var q QuotaUsage
	rest = strings.TrimSpace(rest)
	res, rest, ok := strings.Cut(rest, " max:")
	if !ok {
		return QuotaUsage{}, false
	}
	q.Resource = strings.TrimSpace(res)
	limitPart, actualPart, ok := strings.Cut(rest, "|")
	if !ok {
		return QuotaUsage{}, false
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(limitPart), "limit = %g", &q.Limit); err != nil {
		return QuotaUsage{}, false
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(actualPart), "actual = %g", &q.Actual); err != nil {
		return QuotaUsage{}, false
	}
	return q, true
}
