package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotastate"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// ForgetQuotaState stops the controller and deletes what it saved of the quota (the
// quotastate ConfigMap), so that its next start knows nothing of the quota, as a fresh install.
func (e *Env) ForgetQuotaState(ctx context.Context) error {
	if e.ctrl != nil {
		if err := e.ctrl.Stop(); err != nil {
			return err
		}
	}
	cm, err := e.QuotaStateKey()
	if err != nil {
		return err
	}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
	if err := client.IgnoreNotFound(e.Client.Delete(ctx, obj)); err != nil {
		return fmt.Errorf("deleting the saved quota state %s: %w", cm, err)
	}
	return nil
}

// QuotaStateKey is where the controller saves the quota tracker's memory.
func (e *Env) QuotaStateKey() (client.ObjectKey, error) {
	env, err := e.Bundle.DeploymentEnv()
	if err != nil {
		return client.ObjectKey{}, err
	}
	return client.ObjectKey{Namespace: env["SYSTEM_NAMESPACE"], Name: quotastate.ConfigMapName}, nil
}

// ProviderMetrics are the names of every metric the provider registers, as the generated
// reference lists them (docs/reference/metrics.md, which make verify keeps in step with the
// code): a test reading a provider metric by a name not among them reads a metric that does
// not exist, and must fail rather than read 0.
func (e *Env) ProviderMetrics() (map[string]bool, error) {
	raw, err := os.ReadFile(filepath.Join(e.root, "docs", "reference", "metrics.md"))
	if err != nil {
		return nil, fmt.Errorf("reading the metrics reference: %w", err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| \\[`(karpenter_clevercloud_[a-z0-9_]+)`\\]").FindAllStringSubmatch(string(raw), -1) {
		names[m[1]] = true
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("the metrics reference lists no provider metric")
	}
	return names, nil
}

// QuotaStateRemembers says whether the controller saved any memory of the quota (a refused
// use, a suspected leak, a doubt of CKE's default): what a restart would carry into the next
// scenario.
func (e *Env) QuotaStateRemembers(ctx context.Context) (bool, error) {
	key, err := e.QuotaStateKey()
	if err != nil {
		return false, err
	}
	cm := &corev1.ConfigMap{}
	if err := e.Client.Get(ctx, key, cm); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	var s quota.Snapshot
	if err := json.Unmarshal([]byte(cm.Data[quotastate.KeySnapshot]), &s); err != nil {
		return true, nil // unreadable: forget it too
	}
	return len(s.Refused)+len(s.Leaks)+len(s.Doubts) > 0, nil
}
