package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

type auditEvent struct {
	Stage string `json:"stage"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	Verb      string `json:"verb"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	RequestURI     string `json:"requestURI"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// RBAC: every request the controller made, as the bundle's ServiceAccount, over every
// scenario that ran before this one, was allowed. Runs last (file order).
func TestRBACFromAuditLog(t *testing.T) {
	RegisterTestingT(t)
	f, err := os.Open(env.Cluster.AuditLogPath())
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	total := 0
	kinds := map[string]int{}
	var forbidden []string
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.User.Username != stack.ServiceAccountUser || ev.ResponseStatus == nil {
			continue
		}
		if ev.Stage != "" && ev.Stage != "ResponseComplete" && ev.Stage != "ResponseStarted" {
			continue
		}
		total++
		what := ev.RequestURI
		if ev.ObjectRef != nil {
			what = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
			if ev.ObjectRef.APIGroup != "" {
				what += "." + ev.ObjectRef.APIGroup
			}
		}
		kinds[ev.Verb+" "+what]++
		if ev.ResponseStatus.Code == 403 {
			forbidden = append(forbidden, fmt.Sprintf("%s %s", ev.Verb, ev.RequestURI))
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	var keys []string
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	t.Logf("%d requests by %s, %d distinct verb/resource pairs: %v", total, stack.ServiceAccountUser, len(keys), keys)
	Expect(total).To(BeNumerically(">", 100), "the controller's requests are in the audit log")
	Expect(kinds).To(HaveKey("create nodegroups.api.clever-cloud.com"))
	Expect(forbidden).To(BeEmpty(), "requests the bundle's RBAC forbade")
}
