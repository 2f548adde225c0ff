package conformance

import (
	"regexp"
	"strings"
)

// Category says why a spec does not run: each is a reason a reader can check.
type Category string

const (
	// InCluster specs need Karpenter running as a Pod of the cluster: they read or change the
	// karpenter Deployment in kube-system and wait for its rollout. The simulated CKE's nodes
	// run no containers; the harness runs the controller binary out of cluster instead.
	InCluster Category = "needs Karpenter as an in-cluster Pod"
	// Platform specs exercise something CKE cannot have; the reason names the platform fact.
	Platform Category = "CKE cannot have it"
	// LongTimer specs wait on one of core's long timers; they run with CONFORMANCE_FULL=1.
	LongTimer Category = "timer too long for CI (runs with CONFORMANCE_FULL=1)"
	// SelfSkip specs skip themselves at run time; the reason is the suite's own message.
	SelfSkip Category = "skipped by the suite itself"
)

// Skip is one entry of the skip list: the specs of Suite whose full text matches Pattern.
// The full text is what ginkgo's --ginkgo.skip matches: the suite's description
// ("Regression", "Disruption"), then the container texts and the spec's own, space-separated.
type Skip struct {
	Suite    string
	Pattern  string
	Category Category
	Reason   string
}

// Skips is the whole skip list. Everything not listed runs.
var Skips = []Skip{
	{
		Suite: "regression", Pattern: `^Regression DefaultTopologySpreadConstraints `, Category: Platform,
		Reason: "The specs assert that 4 pods land in 4 distinct topology.kubernetes.io/zone values " +
			"(\"no more than the number of zones the provider offers\"); CKE has one region and zone, par. " +
			"They also find the scheduler's defaults in a kube-scheduler Pod's arguments " +
			"in kube-system and set SCHEDULER_CONFIG on the karpenter Deployment: CKE's scheduler is managed and " +
			"not a Pod a user configures.",
	},
	{
		Suite: "regression",
		Pattern: `^Regression CapacityBuffer .*(` +
			`should provision capacity when a buffer with podTemplateRef is applied|` +
			`should allow consumer pods to use existing buffer capacity and then refill|` +
			`should refill buffer capacity after consumption|` +
			`should not empty-consolidate nodes hosting buffer pods|` +
			`should consolidate buffer nodes after buffer is deleted|` +
			`should allow drift to replace buffer nodes|` +
			`should scale buffer down when replicas are reduced|` +
			`should not provision buffer capacity beyond NodePool CPU limit|` +
			`should provision capacity independently for multiple buffers)$`,
		Category: Platform,
		Reason: "The specs count on 2-vCPU instance types, so that 2 or 3 buffer pods of 1 CPU need 2 nodes (\"With 2-CPU nodes, " +
			"a 4-CPU limit allows at most 2 nodes\"; with KWOK the suite pins c-2x types). CKE's smallest flavor, 2XS, has 4 vCPU: " +
			"the pods share one node and the expected second node never comes.",
	},
	{
		Suite: "regression", Pattern: `^Regression Integration DaemonSet should correctly account for host ports of uncached daemonset pods targeting different instance types$`,
		Category: Platform,
		Reason: "needs both amd64 and arm64 instance types (\"requires provider to offer both amd64 and arm64\"); " +
			"every CKE flavor is amd64.",
	},
	{
		Suite: "regression", Pattern: `^Regression Chaos Runaway Scale-Up should not produce a runaway scale-up when consolidation is enabled$`,
		Category: Platform,
		Reason: "pins the NodePool to karpenter.sh/capacity-type=spot; CKE sells on-demand only, so no node " +
			"would launch and the assertion (fewer than 35 nodes) would pass without testing anything.",
	},
	{
		Suite: "regression", Pattern: `should delete a NodeClaim after the registration timeout when the node doesn't register`,
		Category: LongTimer,
		Reason:   "waits for core's 15-minute registration TTL (Eventually up to 17 min)",
	},
	{
		Suite: "disruption", Pattern: `^Disruption Reboot `, Category: Platform,
		Reason: "CKE cannot reboot a node: the NodeGroup API's only mutable field is nodeCount, " +
			"so the provider's Reboot answers NodeRebootNotImplemented and it declares no reboot RepairPolicy; " +
			"there is no --reboot-condition to give.",
	},
	{
		Suite: "disruption", Pattern: `^Disruption Drift NodePool Drift NodeRequirements$`, Category: Platform,
		Reason: "drifts the NodePool to karpenter.sh/capacity-type=spot; CKE sells on-demand only, so the " +
			"replacement can never launch and the drifted node is (rightly) never removed.",
	},
	{
		Suite: "disruption", Pattern: `^Disruption Repair (repairs|trips|resumes|force-terminates|does not repair|respects|ignores) `,
		Category: LongTimer,
		Reason: "The provider's RepairPolicy replaces a node whose kubelet reports NotReady for 10 minutes. The specs backdate " +
			"the injected condition by a day, but core counts a toleration from the node's creation at the earliest " +
			"(pkg/controllers/node/health/policy.go clamps the transition time), so each spec waits over 10 minutes for a node " +
			"it has just launched. CONFORMANCE_FULL=1 runs them against a controller that links a 30 s toleration instead.",
	},
	{
		Suite: "disruption", Pattern: `^Disruption TerminateFirst `, Category: InCluster,
		Reason: "reads and overrides FEATURE_GATES on the karpenter Deployment in kube-system (ExpectSettings, " +
			"ExpectSettingsOverridden) and waits for its rollout.",
	},
	{
		Suite: "disruption", Pattern: `^Disruption Drift Failure should not disrupt a drifted node if the replacement node (never registers|registers but never initialized)`,
		Category: LongTimer,
		Reason:   "waits up to 11 minutes for core to give up on the replacement (registration TTL / disruption command timeout), then 2 more",
	},
	{
		Suite: "performance", Pattern: `^Performance Performance Wide Deployments `, Category: Platform,
		Reason: "8 of its 30 deployments (270 of the 1000 pods) ask 30, 32 or 64 GiB of memory; CKE's largest flavor, XL, has " +
			"29.07 GiB allocatable (32 GB nominal, 30584176Ki less the kubelet's 100Mi), so those pods can never run and the " +
			"scale-out's 1000 healthy pods never come.",
	},
}

// activeSkips are the entries that apply to suite in this mode: long timers run in full mode.
func activeSkips(suite string, full bool) []Skip {
	var out []Skip
	for _, s := range Skips {
		if s.Suite != suite || (full && s.Category == LongTimer) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// LongTimerFocus is a --ginkgo.focus value matching every spec that waits on a long timer,
// in any suite: the patterns include their suite's description.
func LongTimerFocus() string {
	var parts []string
	for _, s := range Skips {
		if s.Category == LongTimer {
			parts = append(parts, "(?:"+s.Pattern+")")
		}
	}
	return strings.Join(parts, "|")
}

// skipRegexp is the --ginkgo.skip value for the active entries; "" when there are none.
func skipRegexp(skips []Skip) string {
	parts := make([]string, 0, len(skips))
	for _, s := range skips {
		parts = append(parts, "(?:"+s.Pattern+")")
	}
	return strings.Join(parts, "|")
}

// skipFor finds the entry that skipped a spec, by the same match ginkgo made.
func skipFor(skips []Skip, fullText string) (Skip, bool) {
	for _, s := range skips {
		if regexp.MustCompile(s.Pattern).MatchString(fullText) {
			return s, true
		}
	}
	return Skip{}, false
}
