package lifecycle

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

// docs/install.md's upgrade, from the previous release with nodes running: the new CRDs and
// controller objects applied over the old, the controller restarted on the new binary. Nothing
// the old controller launched is touched — no NodeGroup created or deleted, no NodeClaim
// drifted or deleted, no Node replaced, no pod moved — through the new controller's first
// passes over all of it; then the new controller launches, and consolidates a node the old one
// launched, deleting its NodeGroup. Asserted on behaviour only: how a release records that it
// owns a NodeGroup may change between the two (and be migrated on the fly).
func TestUpgradeWithNodesRunning(t *testing.T) {
	ctx := context.Background()
	NewWithT(t).Expect(install(ctx, previous)).To(Succeed())
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", map[string]string{"example.com/tier": "web"})
	// One 1-CPU pod per 2XS on-demand node: nothing to consolidate while the workload stays.
	pool := s.NodePool("", class, []string{"2XS"}, 10*time.Second, harness.OnDemand)
	s.WaitPoolsReady(pool.Name)
	d := s.Deployment("steady", pool.Name, 2, "1", "1Gi", harness.OnePerNode)
	pods := s.WaitRunning(d, 2, launchTimeout)
	before := waitSteady(s.Ctx, s.G, pool.Name, 2)
	podUIDs := map[string]string{}
	for _, p := range pods {
		podUIDs[p.Name] = string(p.UID) + "@" + p.Spec.NodeName
	}
	launchedByPrevious := slices.Sorted(maps.Keys(before.Claims))

	changed := watchChanges(t)
	upgradeStart := time.Now()
	// Step 2: the CRDs first, then the controller's objects, then the rolling update: the old
	// pod gets SIGTERM, the new image starts with the new Deployment's environment.
	Expect(env.ApplyBundle(s.Ctx, current.bundle)).To(Succeed())
	env.UseBinary(current.binary)
	s.RestartController(nil)
	installed = current

	// The window: until the new controller has been over every claim, group and node with
	// each controller that could drift, delete or re-create one.
	Eventually(func(g Gomega) { firstPassesDone(g, env.Controller(), len(before.Claims)) }).
		WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	t.Logf("upgrade: the new controller's first passes done %s after the upgrade began", time.Since(upgradeStart).Round(100*time.Millisecond))
	Expect(changed.since(0)).To(BeEmpty(), "NodeGroups, NodeClaims or Nodes the upgrade created, deleted or drifted")
	Expect(fleetOf(s.Ctx, s.G, pool.Name)).To(Equal(before), "the pool's claims, groups and nodes, by UID")
	running, now := s.RunningPods(d)
	Expect(running).To(Equal(2))
	for _, p := range now {
		Expect(podUIDs).To(HaveKeyWithValue(p.Name, string(p.UID)+"@"+p.Spec.NodeName), "pod %s unmoved", p.Name)
	}
	// Step 3's check, as the docs give it: the same claims, none Drifted.
	out := kubectl(t, time.Minute, "get", "nodeclaims", "-o", `custom-columns=NAME:.metadata.name,DRIFTED:.status.conditions[?(@.type=="Drifted")].status`, "--no-headers")
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		Expect(fields).To(HaveLen(2), "kubectl line %q", line)
		Expect(fields[1]).To(Equal("<none>"), "NodeClaim %s Drifted", fields[0])
		listed = append(listed, fields[0])
	}
	Expect(listed).To(ConsistOf(launchedByPrevious))

	// A scale-up launches with the new controller, and nothing else moves.
	mark := changed.mark()
	s.Scale(d, 3)
	s.WaitRunning(d, 3, launchTimeout)
	after := waitSteady(s.Ctx, s.G, pool.Name, 3)
	var launched string
	for name := range after.Claims {
		if _, old := before.Claims[name]; !old {
			launched = name
		}
	}
	Expect(launched).NotTo(BeEmpty())
	Expect(changed.since(mark)).To(ConsistOf(
		"created NodeClaim "+launched, "created NodeGroup "+launched, "created Node "+ngv1.NodeName(launched, 0),
	), "what the scale-up changed")
	Expect(s.Metric("karpenter_clevercloud_nodegroup_launches_total", map[string]string{"outcome": "Accepted"})).
		To(BeEquivalentTo(1), "launches by the new controller")

	// Down to one pod: two of the three nodes empty, so at least one the previous release
	// launched; consolidation deletes them, claim and NodeGroup.
	s.Scale(d, 1)
	var survivor string
	Eventually(func(g Gomega) {
		f := fleetOf(s.Ctx, g, pool.Name)
		g.Expect(f.Claims).To(HaveLen(1), "NodeClaims of the pool")
		g.Expect(f.Groups).To(HaveLen(1), "NodeGroups of the pool")
		g.Expect(f.Nodes).To(HaveLen(1), "Nodes of the pool")
		for survivor = range f.Claims {
		}
		g.Expect(f.Groups).To(HaveKey(survivor), "the survivor's own NodeGroup")
	}).WithTimeout(disruptTimeout).WithPolling(time.Second).Should(Succeed())
	var consolidated []string
	for _, name := range launchedByPrevious {
		if name != survivor {
			consolidated = append(consolidated, name)
		}
	}
	Expect(consolidated).NotTo(BeEmpty())
	for _, name := range consolidated {
		err := env.Client.Get(s.Ctx, client.ObjectKey{Name: name}, &ngv1.NodeGroup{})
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		Expect(err).To(HaveOccurred(), "the NodeGroup the previous release launched for %s is deleted", name)
		Expect(changed.since(0)).To(ContainElements("deleted NodeClaim "+name, "deleted NodeGroup "+name, "deleted Node "+ngv1.NodeName(name, 0)))
	}
	Expect(s.Metric("karpenter_voluntary_disruption_decisions_total", map[string]string{"decision": "delete"})).To(BeNumerically(">=", 1))
	// No NodeGroup left behind anywhere: every one that exists is the survivor's.
	groups, err := env.NodeGroups(s.Ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(groups).To(HaveLen(1))
	Expect(groups[0].Name).To(Equal(survivor))
	s.WaitRunning(d, 1, 30*time.Second)
	t.Logf("consolidated after the upgrade: %v (launched by the previous release); survivor %s", consolidated, survivor)
}

// firstPassesDone asserts that the controller c has been over what a cluster of n NodeClaims
// holds with each controller that could act on it: controller-runtime counts reconciles per
// controller, and each named here reconciles every claim (or group, or node) at start.
func firstPassesDone(g Gomega, c *stack.Controller, n int) {
	fams, err := c.Metrics()
	g.Expect(err).NotTo(HaveOccurred())
	for name, least := range map[string]int{
		"nodeclaim.lifecycle":         n, // launch, registration and liveness of each claim
		"nodeclaim.disruption":        n, // the Drifted condition (CloudProvider.IsDrifted)
		"nodeclaim.garbagecollection": 1, // claims whose NodeGroup CloudProvider.List misses
		"clevercloud.launch":          n, // each claim's NodeGroup followed
		"clevercloud.providerid":      n, // each NodeGroup's node
	} {
		g.Expect(stack.Sum(fams, "controller_runtime_reconcile_total", map[string]string{"controller": name})).
			To(BeNumerically(">=", least), "reconciles of %s", name)
	}
	// A whole disruption pass: single-node consolidation is the last method it evaluates.
	g.Expect(stack.Sum(fams, "karpenter_voluntary_disruption_decision_evaluation_duration_seconds", map[string]string{"consolidation_type": "single"})).
		To(BeNumerically(">=", 1), "disruption passes")
	// The NodeGroup garbage collector sets this gauge on every pass, the first at start.
	g.Expect(fams).To(HaveKey("karpenter_clevercloud_nodegroup_garbage_collection_refused"), "NodeGroup garbage-collection passes")
}
