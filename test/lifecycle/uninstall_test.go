package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
)

// docs/install.md's uninstall, step by step with the commands it gives, on a cluster running
// the current release with pods on Karpenter's nodes: the NodePools first while the
// controller runs, every NodeClaim and NodeGroup gone, then the classes, the controller and
// the CRDs. It ends with zero NodeGroups launched by Karpenter and no node of theirs; a node
// group the user made by hand is left alone, as the docs promise, and is deleted by the test
// last, for zero NodeGroups in all. No NodeClaim is left: their CRD is gone, which the
// apiserver allows only once none is.
func TestUninstall(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	logs := watchLog()
	g.Expect(install(ctx, current)).To(Succeed())
	logs.add()
	f := newFixture(t, "uninstall")
	pool := f.pool(f.class())
	d := f.workload(pool, 2)
	f.waitRunning(d, 2)
	before := waitSteady(ctx, g, pool.Name, 2)

	own := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: "users-own-pool"}, Spec: ngv1.NodeGroupSpec{Flavor: "XS", NodeCount: 1}}
	g.Expect(env.Client.Create(ctx, own)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Client.Delete(ctx, own)) })
	ownNode := ngv1.NodeName(own.Name, 0)
	g.Eventually(func() error { return env.Client.Get(ctx, client.ObjectKey{Name: ownNode}, &corev1.Node{}) }).
		WithTimeout(launchTimeout).Should(Succeed(), "the user's own node")
	// The docs' selector finds exactly the NodeGroups Karpenter launched.
	g.Expect(groupNames(kubectl(t, time.Minute, "get", "nodegroups", "-l", v1alpha1.LabelNodeClaim, "-o", "name"))).
		To(ConsistOf(keys(before.Groups)))

	changed := watchChanges(t)
	// Deleting the NodePools first leaves their claims without a pool while they drain:
	// Karpenter core's cluster state logs an error for each claim until it is gone.
	logs.allow(`"controller":"state.nodeclaim".*NodePool.karpenter.sh \\"` + pool.Name + `\\" not found`)
	// 1. The NodePools (and NodeOverlays) while the controller runs.
	kubectl(t, time.Minute, "delete", "nodepools", "--all", "--wait=false")
	kubectl(t, time.Minute, "delete", "nodeoverlays", "--all")
	// 2. Wait for the claims and their NodeGroups (the docs' timeouts, 30m and 10m, are for
	// real VMs).
	kubectl(t, drainTimeout+time.Minute, "wait", "--for=delete", "nodeclaims", "--all", "--timeout="+drainTimeout.String())
	kubectl(t, drainTimeout+time.Minute, "wait", "--for=delete", "nodegroups", "-l", v1alpha1.LabelNodeClaim, "--timeout="+drainTimeout.String())
	g.Expect(kubectl(t, time.Minute, "get", "nodegroups", "-l", v1alpha1.LabelNodeClaim)).To(BeEmpty(), "stdout; 'No resources found' is on stderr")
	g.Eventually(func(g Gomega) {
		nodes, err := env.PoolNodes(ctx, pool.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(nodes).To(BeEmpty(), "the pool's nodes")
	}).WithTimeout(time.Minute).Should(Succeed())
	var want []string
	for name := range before.Claims {
		want = append(want, "marked for deletion NodeClaim "+name, "deleted NodeClaim "+name, "deleted NodeGroup "+name, "deleted Node "+ngv1.NodeName(name, 0))
	}
	g.Expect(changed.since(0)).To(ConsistOf(want), "what steps 1 and 2 changed: the pool's nodes deleted, nothing launched for the evicted pods")
	// 3. The classes: released once no claim uses them, so this returns.
	kubectl(t, time.Minute, "delete", "clevernodeclasses", "--all")
	// 4. The controller. The simulated CKE runs its binary in place of the Deployment's pods,
	// and the Deployment, Service and PodDisruptionBudget were never applied: hence
	// --ignore-not-found.
	g.Expect(env.Controller().Stop()).To(Succeed())
	changed.close() // the NodeClaim watch ends with its CRD
	kubectl(t, 2*time.Minute, "delete", "-f", "out/karpenter.yaml", "--ignore-not-found")
	installed = nil
	// 5. The CRDs.
	kubectl(t, 2*time.Minute, "delete", "-f", "out/crds.yaml")
	for _, crd := range current.bundle.CRDs {
		gone, err := crdGone(ctx, crd.GetName())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gone).To(BeTrue(), "CRD %s deleted", crd.GetName())
	}

	groups, err := env.NodeGroups(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(groups)).To(ConsistOf(own.Name), "NodeGroups after the uninstall: only the user's own")
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: ownNode}, &corev1.Node{})).To(Succeed(), "the user's own node")
	g.Expect(env.Client.Delete(ctx, own)).To(Succeed())
	g.Eventually(func(g Gomega) {
		groups, err := env.NodeGroups(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(names(groups)).To(BeEmpty(), "NodeGroups")
		g.Expect(workerNodes(ctx, g)).To(BeEmpty(), "worker nodes")
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	g.Expect(logs.errors()).To(BeEmpty(), "controller error lines")
}

// The order docs/install.md warns against — `kubectl delete -f install.yaml`: the controller
// and the CRDs at once, the NodePools with their CRD — and the recovery it documents. With no
// controller nothing more is deleted: the claims stay Terminating behind their finalizer,
// their NodeGroups and nodes stay (billed), the NodeClaim and CleverNodeClass CRDs stay
// Terminating behind them — even once the apiserver has waited out its minute for the claims —
// while the NodePool CRD, which nothing holds, is gone. Putting the whole release back
// (`kubectl apply -f install.yaml`: a controller without the NodePool CRD exits after
// controller-runtime's two-minute cache-sync timeout) finishes the job: claims drained and
// deleted with their NodeGroups, the Terminating CRDs gone with them; then the controller and
// the re-created CRDs go, for zero NodeGroups.
func TestUninstallControllerDeletedFirst(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	logs := watchLog()
	g.Expect(install(ctx, current)).To(Succeed())
	logs.add()
	f := newFixture(t, "controller-first")
	pool := f.pool(f.class())
	d := f.workload(pool, 2)
	f.waitRunning(d, 2)
	before := waitSteady(ctx, g, pool.Name, 2)

	changed := watchChanges(t)
	gaveUp := watchCRDGiveUp(t, "nodeclaims.karpenter.sh")
	// `kubectl delete -f dist/install.yaml`: the Deployment's pods go, then everything else.
	g.Expect(env.Controller().Stop()).To(Succeed())
	installed = nil
	kubectl(t, 2*time.Minute, "delete", "-f", "out/crds.yaml", "-f", "out/karpenter.yaml", "--ignore-not-found", "--wait=false")

	// The apiserver marks every claim for deletion and waits a minute for them to go.
	g.Eventually(gaveUp).WithTimeout(3*time.Minute).Should(BeClosed(), "the NodeClaim CRD's finalizer gave up waiting for the claims")
	var want []string
	for name := range before.Claims {
		want = append(want, "marked for deletion NodeClaim "+name)
	}
	g.Expect(changed.since(0)).To(ConsistOf(want), "without a controller: claims marked for deletion, nothing deleted")
	g.Expect(fleetOf(ctx, g, pool.Name)).To(Equal(before), "the pool's claims, NodeGroups and nodes, by UID")
	g.Expect(groupNames(kubectl(t, time.Minute, "get", "nodegroups", "-l", v1alpha1.LabelNodeClaim, "-o", "name"))).
		To(ConsistOf(keys(before.Groups)), "what is still billed")
	for _, name := range terminatingCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed(), "CRD %s Terminating", name)
		g.Expect(crd.DeletionTimestamp).NotTo(BeNil(), "CRD %s Terminating", name)
	}
	gone, err := crdGone(ctx, "nodepools.karpenter.sh")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone).To(BeTrue(), "the NodePool CRD, which nothing holds, is gone: karpenter.yaml alone cannot recover")
	// kubectl delete -f would have waited for the controller's namespace to go.
	g.Eventually(func() bool {
		err := env.Client.Get(ctx, client.ObjectKey{Name: current.bundle.Deployment.Namespace}, &corev1.Namespace{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(2*time.Minute).Should(BeTrue(), "namespace %s deleted", current.bundle.Deployment.Namespace)
	changed.close()

	// The recovery: `kubectl apply -f dist/install.yaml` — the CRDs that are gone re-created,
	// the Terminating ones left so — and the controller with it.
	recovered := time.Now()
	g.Expect(install(ctx, current)).To(Succeed())
	logs.add()
	// The claims outlive their NodePool while they drain (as in the uninstall), and the
	// Terminating CRDs are deleted under the running controller once their last object goes.
	logs.allow(`"controller":"state.nodeclaim".*NodePool.karpenter.sh \\"`+pool.Name+`\\" not found`,
		`"message":"Failed to watch".*the server could not find the requested resource \(get (nodeclaims.karpenter.sh|clevernodeclasses.karpenter.clever-cloud.com)\)`)
	// Then, the docs say, wait for the NodeGroups and for those CRDs (step 2's wait on
	// nodeclaims has no resource type left to wait on).
	kubectl(t, drainTimeout+time.Minute, "wait", "--for=delete", "nodegroups", "-l", v1alpha1.LabelNodeClaim, "--timeout="+drainTimeout.String())
	kubectl(t, drainTimeout+time.Minute, append(append([]string{"wait", "--for=delete"}, prefixed("crd/", terminatingCRDs)...), "--timeout="+drainTimeout.String())...)
	t.Logf("recovered: every NodeGroup and the Terminating CRDs gone %s after the release was put back", time.Since(recovered).Round(100*time.Millisecond))
	g.Eventually(func(g Gomega) {
		g.Expect(workerNodes(ctx, g)).To(BeEmpty(), "worker nodes")
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	// 4. The controller, and 5. the CRDs the recovery re-created.
	g.Expect(env.Controller().Stop()).To(Succeed())
	kubectl(t, 2*time.Minute, "delete", "-f", "out/karpenter.yaml", "--ignore-not-found")
	installed = nil
	kubectl(t, 2*time.Minute, "delete", "-f", "out/crds.yaml", "--ignore-not-found")
	for _, crd := range current.bundle.CRDs {
		gone, err := crdGone(ctx, crd.GetName())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gone).To(BeTrue(), "CRD %s deleted", crd.GetName())
	}
	groups, err := env.NodeGroups(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(groups)).To(BeEmpty(), "NodeGroups")
	g.Expect(logs.errors()).To(BeEmpty(), "controller error lines")
}

// terminatingCRDs are the bundle's CRDs whose objects carry the provider's or Karpenter's
// finalizers: deleted without a controller, they stay Terminating.
var terminatingCRDs = []string{"nodeclaims.karpenter.sh", "clevernodeclasses." + v1alpha1.Group}

func prefixed(prefix string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, prefix+n)
	}
	return out
}

// watchCRDGiveUp returns a channel closed when the apiserver's CRD finalizer reports, on CRD
// name, that it could not confirm zero objects left after waiting for them (a minute): the
// condition that proves the objects outlived a deletion without the controller, with no
// sleep. The condition lasts until the finalizer's next attempt, so it is watched, not
// polled.
func watchCRDGiveUp(t *testing.T, name string) <-chan struct{} {
	t.Helper()
	w, err := env.Client.Watch(context.Background(), &apiextensionsv1.CustomResourceDefinitionList{}, client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatalf("watching CRD %s: %v", name, err)
	}
	t.Cleanup(w.Stop)
	done := make(chan struct{})
	go func() {
		for ev := range w.ResultChan() {
			crd, ok := ev.Object.(*apiextensionsv1.CustomResourceDefinition)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			for _, c := range crd.Status.Conditions {
				if c.Type == apiextensionsv1.Terminating && c.Reason == "InstanceDeletionCheck" {
					t.Logf("CRD %s: %s: %s", name, c.Reason, c.Message)
					close(done)
					return
				}
			}
		}
	}()
	return done
}

// workerNodes are the nodes that are not CKE's control plane.
func workerNodes(ctx context.Context, g Gomega) []string {
	nodes := &corev1.NodeList{}
	g.Expect(env.Client.List(ctx, nodes)).To(Succeed())
	var out []string
	for _, n := range nodes.Items {
		if n.Labels[ngv1.LabelClusterNodeRole] != "control-plane" {
			out = append(out, n.Name)
		}
	}
	return out
}

// groupNames are the names in `kubectl get nodegroups -o name`.
func groupNames(out string) []string {
	var names []string
	for _, f := range strings.Fields(out) {
		_, name, _ := strings.Cut(f, "/")
		names = append(names, name)
	}
	return names
}

func names(groups []ngv1.NodeGroup) []string {
	var out []string
	for _, ng := range groups {
		out = append(out, ng.Name)
	}
	return out
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
