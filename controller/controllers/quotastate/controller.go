// Package quotastate keeps the quota tracker's memory in the cluster, in a ConfigMap the
// controller owns (ConfigMapName, in its own namespace): refused uses, suspected leaks and
// proofs survive a restart and a change of leader, and a user reads the same state with
// `kubectl describe configmap`.
//
// A ConfigMap rather than a CleverNodeClass's status: the quota is the organisation's, one
// for the install whatever the number of classes (none, at install time), and a namespaced
// object the controller's Role alone grants keeps the cluster-wide permissions unchanged.
package quotastate

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// ConfigMapName is the ConfigMap the quota state lives in, in the controller's namespace.
const ConfigMapName = "karpenter-clevercloud-quota"

// The ConfigMap's keys: the snapshot a new leader restores, and the same for people.
const (
	KeySnapshot = "snapshot.json"
	KeySummary  = "summary"
)

// SaveInterval is the most often the state is written: the tracker changes at every count of
// the cluster, the memories it keeps change far less often.
const SaveInterval = 5 * time.Second

// Tracker is what the controller needs of the quota tracker.
type Tracker interface {
	Snapshot() quota.Snapshot
	Restore(quota.Snapshot)
	RestoreSkipped()
	Changed() <-chan struct{}
}

// Controller restores the tracker's memory when it becomes leader, then saves it as it changes.
type Controller struct {
	kube      client.Client
	reader    client.Reader
	tracker   Tracker
	namespace string
	clock     clock.Clock
}

// New builds the controller; reader must read through to the apiserver (the manager's cache
// does not hold ConfigMaps).
func New(kube client.Client, reader client.Reader, tracker Tracker, namespace string, clk clock.Clock) *Controller {
	return &Controller{kube: kube, reader: reader, tracker: tracker, namespace: namespace, clock: clk}
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the leader launches, so
// only it restores and saves.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("quotastate")
	if c.namespace == "" {
		logger.Info("SYSTEM_NAMESPACE is not set: the quota state is kept in memory only, and a restart forgets it")
		c.tracker.RestoreSkipped()
		return nil
	}
	last := c.restore(ctx, logger)
	for {
		changed := c.tracker.Changed()
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(SaveInterval):
		}
		s := c.tracker.Snapshot()
		if last != nil && sameMemory(*last, s) {
			continue
		}
		if err := c.save(ctx, s); err != nil {
			logger.Error(err, "cannot save the quota state; retrying at the next change")
			continue
		}
		last = &s
	}
}

// restore reads the saved state, uncached, and hands it to the tracker; the tracker's
// launches wait for it (quota.Tracker.AwaitRestore).
func (c *Controller) restore(ctx context.Context, logger interface {
	Info(string, ...any)
	Error(error, string, ...any)
}) *quota.Snapshot {
	cm := &corev1.ConfigMap{}
	err := c.reader.Get(ctx, client.ObjectKey{Namespace: c.namespace, Name: ConfigMapName}, cm)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logger.Error(err, "cannot read the saved quota state; starting from what the cluster shows")
		}
		c.tracker.RestoreSkipped()
		return nil
	}
	var s quota.Snapshot
	if err := json.Unmarshal([]byte(cm.Data[KeySnapshot]), &s); err != nil {
		logger.Error(err, "the saved quota state does not decode; starting from what the cluster shows", "configmap", ConfigMapName, "key", KeySnapshot)
		c.tracker.RestoreSkipped()
		return nil
	}
	c.tracker.Restore(s)
	logger.Info("restored the quota state", "savedAt", s.SavedAt, "refused", len(s.Refused), "leaks", len(s.Leaks), "nextProbe", s.NextProbe)
	return &s
}

func (c *Controller) save(ctx context.Context, s quota.Snapshot) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encoding the quota state: %w", err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: ConfigMapName, Labels: map[string]string{
			"app.kubernetes.io/managed-by": "karpenter-clevercloud",
			"app.kubernetes.io/component":  "quota-state",
		}},
		Data: map[string]string{KeySnapshot: string(raw), KeySummary: s.Summary()},
	}
	err = c.kube.Update(ctx, cm)
	if apierrors.IsNotFound(err) {
		err = c.kube.Create(ctx, cm)
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", c.namespace, ConfigMapName, err)
	}
	return nil
}

// sameMemory says whether two snapshots remember the same things (what a restore would use),
// whatever their time and counted use.
func sameMemory(a, b quota.Snapshot) bool {
	a.SavedAt, b.SavedAt = time.Time{}, time.Time{}
	a.InUse, b.InUse = quota.Usage{}, quota.Usage{}
	return reflect.DeepEqual(a, b)
}
