package nodegroup

import (
	"fmt"
	"strings"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
)

// Outcome is the platform's answer to a NodeGroup creation.
type Outcome int

const (
	// Pending: the operator has not decided yet.
	Pending Outcome = iota
	// Accepted: the operator is building the VM.
	Accepted
	// QuotaExceeded: the organisation quota refused the group.
	QuotaExceeded
	// Vanished: the group disappeared (or started terminating) before being accepted.
	Vanished
	// TimedOut: no verdict within the acceptance timeout.
	TimedOut
)

func (o Outcome) String() string {
	names := [...]string{"Pending", "Accepted", "QuotaExceeded", "Vanished", "TimedOut"}
	if int(o) < 0 || int(o) >= len(names) {
		return "Unknown"
	}
	return names[o]
}

// Verdict is an Outcome with the platform's message.
type Verdict struct {
	Outcome Outcome
	Message string
}

// Judge reads the platform's verdict from a NodeGroup's status. A quota rejection wins over
// readiness, because the operator may report both while it rolls back.
func Judge(g *ngv1.NodeGroup) Verdict {
	if g == nil || g.DeletionTimestamp != nil {
		return Verdict{Outcome: Vanished, Message: "the NodeGroup is gone or terminating"}
	}
	if failed := g.Condition(ngv1.ConditionReconcileFailed); failed != nil && failed.Status == "True" && failed.Reason == ngv1.ReasonQuotaExceeded {
		msg := failed.Message
		if msg == "" {
			msg = "ReconcileFailed: QuotaExceeded"
		}
		return Verdict{Outcome: QuotaExceeded, Message: msg}
	}
	if g.Status.Phase == ngv1.PhaseQuotaExceeded {
		msg := "phase QuotaExceeded"
		if failed := g.Condition(ngv1.ConditionReconcileFailed); failed != nil && failed.Message != "" {
			msg = failed.Message
		}
		return Verdict{Outcome: QuotaExceeded, Message: msg}
	}
	if ready := g.Condition(ngv1.ConditionReady); ready != nil && ready.Status == "True" {
		return Verdict{Outcome: Accepted}
	}
	if g.Status.Phase == ngv1.PhaseSynced {
		return Verdict{Outcome: Accepted}
	}
	return Verdict{Outcome: Pending}
}

// QuotaUsage is what a quota rejection message says, e.g.
// "Quota exceeded: RAM max: limit = 40.0 GB | actual = 48.0 GB".
type QuotaUsage struct {
	Resource string // "RAM" or "CPU"
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
