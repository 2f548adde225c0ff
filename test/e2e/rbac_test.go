package e2e

import (
	"fmt"
	"strings"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// checkRBAC proves, from the apiserver's audit log, that every request the controller made
// as the bundle's ServiceAccount over the whole run was allowed. TestMain runs it after every
// scenario, whatever their order or selection, so it sees everything the run exercised.
func checkRBAC(auditLog string) error {
	events, err := (&harness.AuditReader{Path: auditLog}).Read()
	if err != nil {
		return fmt.Errorf("reading the audit log %s: %w", auditLog, err)
	}
	var forbidden []string
	seen := map[string]bool{}
	for _, ev := range events {
		if ev.User.Username != stack.ServiceAccountUser || seen[ev.AuditID] || ev.ResponseStatus.Code == 0 {
			continue
		}
		seen[ev.AuditID] = true
		if ev.ResponseStatus.Code == 403 {
			forbidden = append(forbidden, ev.Verb+" "+ev.RequestURI)
		}
	}
	counts := harness.CountRequests(events, stack.ServiceAccountUser)
	pairs := make([]string, 0, len(counts))
	for _, c := range counts {
		pairs = append(pairs, fmt.Sprintf("%s %s ×%d", c.Verb, c.Resource, c.Count))
	}
	fmt.Printf("e2e: RBAC: %d requests by %s, %d distinct verb/resource pairs: %s\n", len(seen), stack.ServiceAccountUser, len(pairs), strings.Join(pairs, ", "))
	switch {
	case len(seen) == 0:
		return fmt.Errorf("no request by %s in the audit log %s: the controller's requests were not audited", stack.ServiceAccountUser, auditLog)
	case len(forbidden) > 0:
		return fmt.Errorf("the bundle's RBAC forbade %d request(s) of %s: %s", len(forbidden), stack.ServiceAccountUser, strings.Join(forbidden, "; "))
	}
	return nil
}
