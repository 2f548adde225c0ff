package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotausage"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// NodeGroupCRDName is the CRD CKE serves the NodeGroup API with.
const NodeGroupCRDName = "nodegroups.api.clever-cloud.com"

// Scope says what a gathering reads. The preflight command runs as the user (usually a
// cluster admin) and reads everything; the running controller reads only what the bundle's
// RBAC grants it (lists of CRDs, Deployments, NodeGroups and Nodes, and /version), so that
// the RBAC proof of the end-to-end suites stays clean.
type Scope struct {
	// Leases looks for other Karpenter leader leases in every namespace (needs list on
	// leases cluster-wide, which the controller does not have).
	Leases bool
	// Pods lists every pod, to tell whether the controller's requests fit a node.
	Pods bool
	// ConfigMaps and ServiceAccounts read the upstream provider's flavors ConfigMap and
	// ServiceAccount annotations, for the values command.
	Upstream bool
}

// FullScope is the preflight command's: everything.
var FullScope = Scope{Leases: true, Pods: true, Upstream: true}

// RuntimeScope is the running controller's.
var RuntimeScope = Scope{}

// Cluster is how a gathering reads the cluster.
type Cluster struct {
	// Client reads objects; it needs NodeGroup, apps, coordination and apiextensions in its
	// scheme. Uncached in the controller: these lists run once per period.
	Client client.Client
	// Discovery answers /version and the served API groups.
	Discovery discovery.DiscoveryInterface
	// Catalog is the flavor catalogue the controller would use.
	Catalog *catalog.Catalog
	// Namespace is where this provider runs (or will run): its own Deployment and leader
	// lease there are not "another Karpenter".
	Namespace string
	// Quota is the configured organisation quota (settings.quota); zero fields mean CKE's
	// default.
	Quota quota.Limit
}

// Snapshot is what one gathering read. Every list the scope skipped is nil; a read that
// failed leaves its field empty and its error in Errors, and the checks that need it say so.
type Snapshot struct {
	Version *version.Info
	// NodeGroupServed says the apiserver serves api.clever-cloud.com/v1 nodegroups.
	NodeGroupServed bool
	// NodeGroupCRD is the NodeGroup CRD; nil if absent or unreadable.
	NodeGroupCRD *apiextensionsv1.CustomResourceDefinition
	CRDs         []apiextensionsv1.CustomResourceDefinition
	NodeGroups   []ngv1.NodeGroup
	Nodes        []corev1.Node
	Pods         []corev1.Pod
	Deployments  []appsv1.Deployment
	Leases       []coordinationv1.Lease
	// Quota is the count the controller's quota tracker would record.
	Quota *quota.Observation
	// Upstream is the upstream provider's install, when one is found and the scope reads it.
	Upstream *UpstreamInstall

	// Now is when the snapshot was taken, against which lease renewals are judged.
	Now       time.Time
	Catalog   *catalog.Catalog
	Namespace string
	Limit     quota.Limit
	Scope     Scope
	// Errors are the reads that failed, by what they read.
	Errors map[string]error
}

// Gather reads the cluster once, within scope. It fails only when the cluster cannot be
// reached at all (no /version); every other read that fails is recorded in Snapshot.Errors.
func Gather(ctx context.Context, c Cluster, scope Scope) (*Snapshot, error) {
	s := &Snapshot{Now: time.Now(), Catalog: c.Catalog, Namespace: c.Namespace, Limit: c.Quota, Scope: scope, Errors: map[string]error{}}
	v, err := c.Discovery.ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's version (is the kubeconfig's cluster reachable?): %w", err)
	}
	s.Version = v
	record := func(what string, err error) bool {
		if err != nil {
			s.Errors[what] = err
			return false
		}
		return true
	}
	resources, err := c.Discovery.ServerResourcesForGroupVersion(ngv1.GroupVersion.String())
	switch {
	case apierrors.IsNotFound(err):
	case record("discovery of "+ngv1.GroupVersion.String(), err):
		s.NodeGroupServed = slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == "nodegroups" })
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if record("customresourcedefinitions", c.Client.List(ctx, crds)) {
		s.CRDs = crds.Items
		for i := range s.CRDs {
			if s.CRDs[i].Name == NodeGroupCRDName {
				s.NodeGroupCRD = &s.CRDs[i]
			}
		}
	}
	if s.NodeGroupServed {
		groups := &ngv1.NodeGroupList{}
		if record("nodegroups", c.Client.List(ctx, groups)) {
			s.NodeGroups = groups.Items
		}
		if o, err := quotausage.Count(ctx, c.Client, c.Catalog); record("quota usage", err) {
			s.Quota = &o
		}
	}
	nodes := &corev1.NodeList{}
	if record("nodes", c.Client.List(ctx, nodes)) {
		s.Nodes = nodes.Items
	}
	deployments := &appsv1.DeploymentList{}
	if record("deployments", c.Client.List(ctx, deployments)) {
		s.Deployments = deployments.Items
	}
	if scope.Pods {
		pods := &corev1.PodList{}
		if record("pods", c.Client.List(ctx, pods)) {
			s.Pods = pods.Items
		}
	}
	if scope.Leases {
		leases := &coordinationv1.LeaseList{}
		if record("leases", c.Client.List(ctx, leases)) {
			s.Leases = leases.Items
		}
	}
	if scope.Upstream {
		if d := findUpstream(s.Deployments); d != nil {
			u, err := readUpstream(ctx, c.Client, d)
			if record("the upstream provider's install", err) {
				s.Upstream = u
			}
		}
	}
	return s, nil
}

func (s *Snapshot) now() time.Time {
	if s.Now.IsZero() {
		return time.Now()
	}
	return s.Now
}

// errorsFor joins the read errors of whats, for a check whose input failed.
func (s *Snapshot) errorsFor(whats ...string) error {
	var errs []error
	for _, w := range whats {
		if err := s.Errors[w]; err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", w, err))
		}
	}
	return errors.Join(errs...)
}
