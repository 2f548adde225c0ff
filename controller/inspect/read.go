package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpapis "sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotastate"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotausage"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// LeaseName is Karpenter core's leader lease in the controller's namespace (core's
// --leader-election-name default, which the bundle keeps).
const LeaseName = "karpenter-leader-election"

// partOf is the label the bundle puts on everything it installs.
const partOfLabel, partOfOurs = "app.kubernetes.io/part-of", "karpenter-provider-clever-cloud"

// eventReasons are the events status and explain read: the provider's word on a waiting pod,
// core's on the pods it places or cannot, and the refusals that set a flavor aside.
var eventReasons = []string{
	cloudprovider.ReasonWaitingOnQuota, "FailedScheduling", "Nominated",
	cloudprovider.ReasonFlavorUnsupported, cloudprovider.ReasonRefused,
}

// Scheme knows every kind status and explain read.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = ngv1.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	gv := schema.GroupVersion{Group: karpapis.Group, Version: "v1"}
	metav1.AddToGroupVersion(s, gv)
	s.AddKnownTypes(gv, &karpv1.NodePool{}, &karpv1.NodePoolList{}, &karpv1.NodeClaim{}, &karpv1.NodeClaimList{})
	return s
}

// State is what one read of the cluster found. A read that failed leaves its field empty and
// its error in Errors, by what it read: status reports what it could read and names the rest.
type State struct {
	Now       time.Time
	Namespace string
	Lease     *coordinationv1.Lease
	// Deployment is the controller's (the bundle's part-of label in Namespace); nil when none.
	Deployment *appsv1.Deployment
	// LeaderPod is the pod the lease's holder runs in, when it is one of Namespace's.
	LeaderPod   *corev1.Pod
	NodeClasses []v1alpha1.CleverNodeClass
	NodePools   []karpv1.NodePool
	Nodes       []corev1.Node
	// Pods are the pods the command looks at: status's pending pods, explain's one pod.
	Pods   []corev1.Pod
	Events []corev1.Event
	// Snapshot is the quota state the controller saved (nil: none saved); Summary its text.
	Snapshot *quota.Snapshot
	Summary  string
	// Used is the organisation quota use counted now (the snapshot's may be older).
	Used *quota.Usage
	// Catalog is the catalogue the controller serves, as far as the cluster shows it: the
	// embedded base with the overrides file of its Deployment, at the leader's prices when its
	// metrics were read.
	Catalog   *catalog.Catalog
	Overrides Overrides
	// Metrics are the leader's, when the apiserver proxies them.
	Metrics *Metrics
	Errors  map[string]error
}

// Overrides is what status says of the flavors overrides file.
type Overrides struct {
	// Source names the ConfigMap key the controller reads; empty when none is configured.
	Source string
	// Flavors are the flavors it pins; Err why the controller refuses it (then it serves the
	// base catalogue).
	Flavors []string
	Err     error
}

func (s *State) record(what string, err error) bool {
	if err != nil {
		s.Errors[what] = err
		return false
	}
	return true
}

// read reads what both commands need: the controller's install, classes, pools, nodes, the
// events that explain pods and flavors, the quota state and the catalogue.
func read(ctx context.Context, c client.Client, metrics MetricsReader, namespace string) *State {
	s := &State{Now: time.Now(), Namespace: namespace, Errors: map[string]error{}}
	lease := &coordinationv1.Lease{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: LeaseName}, lease); {
	case apierrors.IsNotFound(err):
	case s.record("lease "+namespace+"/"+LeaseName, err):
		s.Lease = lease
	}
	deployments := &appsv1.DeploymentList{}
	if s.record("deployments in "+namespace, c.List(ctx, deployments, client.InNamespace(namespace), client.MatchingLabels{partOfLabel: partOfOurs})) && len(deployments.Items) > 0 {
		s.Deployment = &deployments.Items[0]
	}
	if s.Lease != nil && s.Lease.Spec.HolderIdentity != nil {
		// Core's holder identity is the pod's hostname (its name), "_", a UUID.
		name, _, _ := strings.Cut(*s.Lease.Spec.HolderIdentity, "_")
		pod := &corev1.Pod{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod); {
		case apierrors.IsNotFound(err):
		case s.record("the leader's pod "+namespace+"/"+name, err):
			s.LeaderPod = pod
		}
	}
	classes := &v1alpha1.CleverNodeClassList{}
	if s.record("clevernodeclasses", c.List(ctx, classes)) {
		s.NodeClasses = classes.Items
	}
	pools := &karpv1.NodePoolList{}
	if s.record("nodepools", c.List(ctx, pools)) {
		s.NodePools = pools.Items
		slices.SortFunc(s.NodePools, func(a, b karpv1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	}
	nodes := &corev1.NodeList{}
	if s.record("nodes", c.List(ctx, nodes)) {
		s.Nodes = nodes.Items
	}
	for _, reason := range eventReasons {
		evs := &corev1.EventList{}
		if s.record("events "+reason, c.List(ctx, evs, client.MatchingFields{"reason": reason})) {
			s.Events = append(s.Events, evs.Items...)
		}
	}
	cm := &corev1.ConfigMap{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: quotastate.ConfigMapName}, cm); {
	case apierrors.IsNotFound(err):
	case s.record("ConfigMap "+namespace+"/"+quotastate.ConfigMapName, err):
		s.Summary = cm.Data[quotastate.KeySummary]
		var snap quota.Snapshot
		if err := json.Unmarshal([]byte(cm.Data[quotastate.KeySnapshot]), &snap); err != nil {
			s.record("the quota state", fmt.Errorf("decoding %s of ConfigMap %s/%s: %w", quotastate.KeySnapshot, namespace, quotastate.ConfigMapName, err))
		} else {
			s.Snapshot = &snap
		}
	}
	if metrics != nil && s.LeaderPod != nil {
		m, err := metrics(ctx, s.LeaderPod)
		s.record("the leader's metrics", err)
		s.Metrics = m
	}
	s.readCatalog(ctx, c)
	if s.Catalog != nil {
		if o, err := quotausage.Count(ctx, c, s.Catalog); s.record("quota usage", err) {
			s.Used = &o.Usage
		}
	}
	return s
}

// readCatalog builds the catalogue the controller serves: the embedded base, the overrides
// file its Deployment mounts (judged as the controller judges it), and the prices its metrics
// show, which include the price refresher's.
func (s *State) readCatalog(ctx context.Context, c client.Client) {
	region := "par"
	var ovs []catalog.Override
	if d := s.Deployment; d != nil && len(d.Spec.Template.Spec.Containers) > 0 {
		ctr := d.Spec.Template.Spec.Containers[0]
		for _, e := range ctr.Env {
			switch e.Name {
			case "CLEVER_CLOUD_REGION":
				if e.Value != "" {
					region = e.Value
				}
			case "FLAVORS_CONFIG_PATH":
				if e.Value != "" {
					ovs = s.readOverrides(ctx, c, d, ctr, e.Value)
				}
			}
		}
	}
	base, err := catalog.LoadBase()
	if !s.record("the embedded catalogue", err) {
		return
	}
	cat, err := catalog.New(base, region, ovs, logr.Discard())
	if err != nil {
		// The controller refuses the whole file then, and serves the base catalogue.
		s.Overrides.Err, s.Overrides.Flavors = err, nil
		cat, err = catalog.New(base, region, nil, logr.Discard())
		if !s.record("the embedded catalogue", err) {
			return
		}
	}
	if s.Metrics != nil && s.Metrics.OverridesValid != nil && *s.Metrics.OverridesValid == 0 && s.Overrides.Err == nil && s.Overrides.Source != "" {
		s.Overrides.Err = fmt.Errorf("the controller refused it (karpenter_clevercloud_catalog_overrides_valid is 0): see its log")
	}
	s.Catalog = cat
}

// readOverrides reads the ConfigMap key the Deployment mounts at path.
func (s *State) readOverrides(ctx context.Context, c client.Client, d *appsv1.Deployment, ctr corev1.Container, file string) []catalog.Override {
	dir, key := path.Split(file)
	var cmName string
	for _, m := range ctr.VolumeMounts {
		if strings.TrimSuffix(m.MountPath, "/") != strings.TrimSuffix(dir, "/") {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cmName = v.ConfigMap.Name
			}
		}
	}
	if cmName == "" {
		s.Overrides = Overrides{Source: file, Err: fmt.Errorf("FLAVORS_CONFIG_PATH=%s is not a ConfigMap the Deployment %s/%s mounts", file, d.Namespace, d.Name)}
		return nil
	}
	s.Overrides.Source = fmt.Sprintf("ConfigMap %s/%s key %s", d.Namespace, cmName, key)
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: cmName}, cm); err != nil {
		s.Overrides.Err = fmt.Errorf("reading %s: %w", s.Overrides.Source, err)
		return nil
	}
	ovs, err := catalog.ParseOverrides([]byte(cm.Data[key]))
	if err != nil {
		s.Overrides.Err = fmt.Errorf("%s: %w", s.Overrides.Source, err)
		return nil
	}
	for _, o := range ovs {
		s.Overrides.Flavors = append(s.Overrides.Flavors, o.Name)
	}
	return ovs
}

// price is a flavor's price per hour: the leader's when its metrics were read, else the
// catalogue's.
func (s *State) price(flavor string) (float64, bool) {
	if s.Metrics != nil {
		if p, ok := s.Metrics.Prices[flavor]; ok {
			return p, true
		}
	}
	if s.Catalog == nil {
		return 0, false
	}
	f, ok := s.Catalog.Flavor(flavor)
	return f.PriceHourly, ok
}

// eventTime is when an event last happened, whichever of its timestamps the recorder set.
func eventTime(ev corev1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

// eventsOf are the events about one object, newest first.
func (s *State) eventsOf(kind, namespace, name string, reasons ...string) []corev1.Event {
	var out []corev1.Event
	for _, ev := range s.Events {
		o := ev.InvolvedObject
		if o.Kind == kind && o.Namespace == namespace && o.Name == name && (len(reasons) == 0 || slices.Contains(reasons, ev.Reason)) {
			out = append(out, ev)
		}
	}
	slices.SortStableFunc(out, func(a, b corev1.Event) int { return eventTime(b).Compare(eventTime(a)) })
	return out
}
