package sim_test

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
)

// The e2e suite proves RBAC from the audit log; this checks the log names who did what.
func TestAuditLogRecordsUserVerbAndResource(t *testing.T) {
	create(t, newGroup("audit", "2XS", 1))
	waitNodeReady(t, "audit-node0")
	eventually(t, 10*time.Second, func() error {
		f, err := os.Open(cluster.AuditLogPath())
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				Verb      string                    `json:"verb"`
				User      struct{ Username string } `json:"user"`
				ObjectRef struct {
					Resource string `json:"resource"`
					Name     string `json:"name"`
				} `json:"objectRef"`
			}
			if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.User.Username == sim.OperatorUser &&
				ev.Verb == "create" && ev.ObjectRef.Resource == "nodes" && ev.ObjectRef.Name == "audit-node0" {
				return nil
			}
		}
		return errNotYet("no audit event of the operator creating audit-node0")
	})
}

type errNotYet string

func (e errNotYet) Error() string { return string(e) }
