package stack

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotastate"
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
