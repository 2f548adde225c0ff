package preflight

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	karpapis "sigs.k8s.io/karpenter/pkg/apis"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
)

// Evaluate runs every check on a snapshot, in a fixed order. The placement check runs only
// when p is not nil.
func Evaluate(s *Snapshot, p *Placement) Report {
	r := Report{
		checkNodeGroupAPI(s),
		checkFlavors(s),
		checkKubernetesVersion(s),
		checkCKEAutoscaler(s),
		checkOtherKarpenter(s),
	}
	if p != nil {
		r = append(r, checkPlacement(s, *p))
	}
	return append(r, checkQuota(s))
}

// RuntimeChecks are the checks whose answer can change while the controller runs, which it
// repeats: the platform's flavors and version move with CKE upgrades, and an autoscaler or
// another Karpenter can be switched on at any time; the quota moves with every launch.
// Placement is left out: the controller already runs wherever it was placed.
var RuntimeChecks = []string{CheckNodeGroupAPI, CheckFlavors, CheckKubernetesVersion, CheckCKEAutoscaler, CheckOtherKarpenter, CheckQuota}

func checkNodeGroupAPI(s *Snapshot) Check {
	c := Check{Name: CheckNodeGroupAPI}
	if err := s.errorsFor("discovery of " + ngv1.GroupVersion.String()); err != nil {
		c.Result, c.Found = Fail, "could not tell whether the NodeGroup API is served: "+err.Error()
		c.Action = "check the kubeconfig's identity may read API discovery (/apis)"
		return c
	}
	if !s.NodeGroupServed {
		c.Result = Fail
		c.Found = "the apiserver does not serve " + ngv1.GroupVersion.String() + " nodegroups: not a CKE cluster, or CKE's node-group operator is missing"
		c.Action = "run against a CKE cluster: the provider launches nodes only through NodeGroups"
		return c
	}
	c.Result = Pass
	c.Found = fmt.Sprintf("NodeGroup API served (%s), %d NodeGroup(s)", ngv1.GroupVersion, len(s.NodeGroups))
	if err := s.errorsFor("nodegroups"); err != nil {
		c.Result, c.Found = Fail, "NodeGroup API served but not readable: "+err.Error()
		c.Action = "the provider needs get, list, watch, create, patch and delete on nodegroups"
	}
	return c
}

// ServedFlavors returns the flavors the NodeGroup CRD's schema accepts on spec.flavor (its
// enum, in the served storage version), or nil when the schema lists none.
func ServedFlavors(crd *apiextensionsv1.CustomResourceDefinition) []string {
	if crd == nil {
		return nil
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Name != ngv1.GroupVersion.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		spec, ok := v.Schema.OpenAPIV3Schema.Properties["spec"]
		if !ok {
			return nil
		}
		flavor, ok := spec.Properties["flavor"]
		if !ok {
			return nil
		}
		var out []string
		for _, e := range flavor.Enum {
			var name string
			if json.Unmarshal(e.Raw, &name) == nil {
				out = append(out, name)
			}
		}
		return out
	}
	return nil
}

func checkFlavors(s *Snapshot) Check {
	c := Check{Name: CheckFlavors}
	if !s.NodeGroupServed {
		c.Result, c.Found = Fail, "not checked: no NodeGroup API"
		return c
	}
	if s.NodeGroupCRD == nil {
		c.Result = Warn
		c.Found = "could not read the NodeGroup CRD to learn which flavors it accepts"
		if err := s.errorsFor("customresourcedefinitions"); err != nil {
			c.Found += ": " + err.Error()
		}
		c.Action = "grant list on customresourcedefinitions to check; meanwhile a launch of a flavor the API refuses is set aside at its first refusal"
		return c
	}
	served := ServedFlavors(s.NodeGroupCRD)
	var catalogue []string
	for _, f := range s.Catalog.Flavors() {
		catalogue = append(catalogue, f.Name)
	}
	if len(served) == 0 {
		c.Result = Warn
		c.Found = "the NodeGroup CRD lists no flavors (no enum on spec.flavor): the catalogue's " + strings.Join(catalogue, ", ") + " cannot be checked"
		c.Action = "nothing to change; a flavor the platform refuses is set aside at its first refusal"
		return c
	}
	refused := without(catalogue, served)
	unsized := without(served, catalogue)
	var found, actions []string
	if len(refused) > 0 {
		found = append(found, "the catalogue offers "+strings.Join(refused, ", ")+" which the CRD refuses (HTTP 422 at each launch)")
		actions = append(actions, "restrict your NodePools' node.kubernetes.io/instance-type to "+strings.Join(served, ", "))
	}
	if len(unsized) > 0 {
		found = append(found, "the CRD accepts "+strings.Join(unsized, ", ")+" which the catalogue cannot size, so Karpenter never launches them")
		actions = append(actions, "to use them, add each to settings.flavors with cpu, memoryKi and priceHourly")
	}
	if len(found) == 0 {
		c.Result, c.Found = Pass, "the NodeGroup CRD accepts "+strings.Join(served, ", ")+", exactly the catalogue's flavors"
		return c
	}
	c.Result, c.Found, c.Action = Warn, strings.Join(found, "; "), strings.Join(actions, "; ")
	return c
}

// without returns the items of a not in b, in a's order.
func without(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

func checkKubernetesVersion(s *Snapshot) Check {
	c := Check{Name: CheckKubernetesVersion}
	tested := strings.Join(version.TestedKubernetes, ", ")
	ok, err := version.KubernetesTested(s.Version.GitVersion)
	if err != nil {
		c.Result, c.Found = Warn, "could not read the apiserver's version: "+err.Error()
		c.Action = "check the cluster runs Kubernetes " + tested
		return c
	}
	var off []string
	for _, n := range s.Nodes {
		if t, err := version.KubernetesTested(n.Status.NodeInfo.KubeletVersion); err == nil && !t {
			off = append(off, n.Name+" ("+n.Status.NodeInfo.KubeletVersion+")")
		}
	}
	sort.Strings(off)
	var found []string
	if !ok {
		found = append(found, "the apiserver runs "+s.Version.GitVersion+", a version this release is not tested on")
	}
	if len(off) > 0 {
		found = append(found, "kubelets outside the tested versions: "+strings.Join(limit(off, 5), ", "))
	}
	if len(found) == 0 {
		c.Result, c.Found = Pass, fmt.Sprintf("Kubernetes %s, kubelets of %d node(s) alike: tested (%s)", s.Version.GitVersion, len(s.Nodes), tested)
		return c
	}
	c.Result, c.Found = Warn, strings.Join(found, "; ")+"; tested: "+tested
	c.Action = "use a release tested on this version (see the compatibility table), or proceed knowing Karpenter core's behaviour on it is unproven"
	return c
}

// limit keeps the first n items of a list for a one-line message, saying how many it left out.
func limit(items []string, n int) []string {
	if len(items) <= n {
		return items
	}
	return append(slices.Clone(items[:n]), fmt.Sprintf("and %d more", len(items)-n))
}

// invisibleAutoscaler says plainly what a check from inside the cluster cannot see.
const invisibleAutoscaler = "CKE's autoscalingEnabled is a cluster setting the NodeGroup API does not show: only the resizes it makes can be seen from inside"

// nodeCountWriter names the field manager that last wrote a group's spec.nodeCount, and when.
func nodeCountWriter(g *ngv1.NodeGroup) (manager string, at time.Time) {
	for _, mf := range g.ManagedFields {
		if mf.FieldsV1 == nil {
			continue
		}
		var fields map[string]map[string]any
		if json.Unmarshal(mf.FieldsV1.Raw, &fields) != nil {
			continue
		}
		if _, ok := fields["f:spec"]["f:nodeCount"]; !ok {
			continue
		}
		t := time.Time{}
		if mf.Time != nil {
			t = mf.Time.Time
		}
		if manager == "" || t.After(at) {
			manager, at = mf.Manager, t
		}
	}
	return manager, at
}

func checkCKEAutoscaler(s *Snapshot) Check {
	c := Check{Name: CheckCKEAutoscaler}
	if !s.NodeGroupServed || s.Errors["nodegroups"] != nil {
		c.Result, c.Found = Warn, "not checked: NodeGroups unreadable. "+invisibleAutoscaler
		c.Action = "make sure CKE's autoscaling is off for this cluster in the Clever Cloud console"
		return c
	}
	var ours, others []string
	for i := range s.NodeGroups {
		g := &s.NodeGroups[i]
		managed := nodegroup.IsManaged(g) || g.Labels[v1alpha1.UpstreamLabelManaged] == "true"
		if managed {
			// Karpenter's groups hold one node each; another count was written by someone else.
			if g.Spec.NodeCount != 1 {
				ours = append(ours, fmt.Sprintf("%s asks for %d nodes%s", g.Name, g.Spec.NodeCount, by(g)))
			}
			continue
		}
		// Only nodeCount is mutable on a NodeGroup: a spec that changed since creation is a resize.
		if g.Generation > 1 {
			others = append(others, fmt.Sprintf("%s (not Karpenter's, now %d nodes) was resized after creation%s", g.Name, g.Spec.NodeCount, by(g)))
		}
	}
	sort.Strings(ours)
	sort.Strings(others)
	switch {
	case len(ours) > 0:
		c.Result = Fail
		c.Found = "Karpenter's NodeGroups resized by something other than the provider: " + strings.Join(limit(ours, 5), "; ") + ". " + invisibleAutoscaler
		c.Action = "set their nodeCount back to 1 (a resized Karpenter group stalls Karpenter's cluster state) and turn CKE's autoscaling off"
		if len(others) > 0 {
			c.Found += "; also " + strings.Join(limit(others, 3), "; ")
		}
	case len(others) > 0:
		c.Result = Warn
		c.Found = strings.Join(limit(others, 5), "; ") + ". " + invisibleAutoscaler
		c.Action = "if neither you nor your tooling resized them, CKE's autoscaler is on: turn it off before Karpenter runs, two autoscalers fight"
	default:
		c.Result = Pass
		c.Found = fmt.Sprintf("no sign: none of %d NodeGroup(s) resized by anyone but its creator. %s", len(s.NodeGroups), invisibleAutoscaler)
	}
	return c
}

// by says who last wrote a group's nodeCount, for a message.
func by(g *ngv1.NodeGroup) string {
	m, at := nodeCountWriter(g)
	if m == "" {
		return ""
	}
	if at.IsZero() {
		return fmt.Sprintf(" by %q", m)
	}
	return fmt.Sprintf(" by %q at %s", m, at.UTC().Format(time.RFC3339))
}

// LeaderLease is the leader-election lease every Karpenter built on core holds.
const LeaderLease = "karpenter-leader-election"

// leaseFresh is how recent a renewal must be for a lease to prove a running holder: core
// renews every 2 s and lets a lease lapse after 15 s.
const leaseFresh = time.Minute

func checkOtherKarpenter(s *Snapshot) Check {
	c := Check{Name: CheckOtherKarpenter}
	var running, idle, notes []string
	for i := range s.Deployments {
		d := &s.Deployments[i]
		k := classify(d)
		if k == kindNone || (k == kindOurs && d.Namespace == s.Namespace) {
			continue
		}
		desc := fmt.Sprintf("%s %s/%s (%s)", k, d.Namespace, d.Name, strings.Join(images(d), ", "))
		if d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			idle = append(idle, desc+" scaled to 0")
		} else {
			running = append(running, desc)
		}
	}
	now := s.now()
	for _, l := range s.Leases {
		if l.Name != LeaderLease || l.Namespace == s.Namespace || l.Spec.RenewTime == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			continue
		}
		if age := now.Sub(l.Spec.RenewTime.Time); age < leaseFresh {
			running = append(running, fmt.Sprintf("a Karpenter leader lease %s/%s held by %s, renewed %s ago", l.Namespace, l.Name, *l.Spec.HolderIdentity, age.Round(time.Second)))
		}
	}
	for _, crd := range s.CRDs {
		g := crd.Spec.Group
		if strings.Contains(g, "karpenter") && g != karpapis.Group && g != v1alpha1.Group {
			notes = append(notes, "another provider's CRD "+crd.Name)
		}
		if crd.Name == "clevernodeclasses."+v1alpha1.Group && crd.Annotations["meta.helm.sh/release-name"] != "" {
			notes = append(notes, fmt.Sprintf("the CleverNodeClass CRD is Helm release %q's (upstream's karpenter-crd chart): never helm uninstall it", crd.Annotations["meta.helm.sh/release-name"]))
		}
	}
	upstreamGroups := 0
	for _, g := range s.NodeGroups {
		if g.Labels[v1alpha1.UpstreamLabelManaged] == "true" {
			upstreamGroups++
		}
	}
	if upstreamGroups > 0 {
		notes = append(notes, fmt.Sprintf("%d NodeGroup(s) launched by the upstream provider, which this one adopts", upstreamGroups))
	}
	sort.Strings(running)
	sort.Strings(idle)
	switch {
	case len(running) > 0:
		c.Result = Fail
		c.Found = "running: " + strings.Join(running, "; ")
		c.Action = "stop it before this provider runs: two Karpenters launch and delete nodes against each other (upstream provider: docs/switch-from-upstream.md)"
	case len(idle) > 0:
		c.Result = Warn
		c.Found = "installed but not running: " + strings.Join(idle, "; ")
		c.Action = "uninstall it, so that nothing scales it back up beside this provider"
	case len(notes) > 0:
		c.Result = Warn
		c.Found = "no other Karpenter runs, but: " + strings.Join(notes, "; ")
		c.Action = "follow docs/switch-from-upstream.md for what the upstream provider left"
		return c
	default:
		c.Result, c.Found = Pass, "no other Karpenter controller nor the upstream provider found"
		if !s.Scope.Leases {
			c.Found += " (Deployments only: leader leases not read)"
		}
		return c
	}
	if len(notes) > 0 {
		c.Found += "; also " + strings.Join(notes, "; ")
	}
	return c
}

// kind is what a Deployment is to this provider.
type kind string

const (
	kindNone     kind = ""
	kindOurs     kind = "this provider"
	kindUpstream kind = "the upstream provider"
	kindOther    kind = "a Karpenter controller"
)

// Our bundle's label, on every object it renders.
const (
	partOfLabel = "app.kubernetes.io/part-of"
	partOfOurs  = "karpenter-provider-clever-cloud"
)

// upstreamImage is the repository upstream's chart pulls by default.
const upstreamImage = "ghcr.io/clevercloud/karpenter"

// classify tells this provider's Deployment, the upstream provider's (its Helm chart's labels
// and its CLEVER_CLOUD_REGION variable, or its published image) and any other Karpenter
// controller (an image or a name that says karpenter).
func classify(d *appsv1.Deployment) kind {
	if d.Labels[partOfLabel] == partOfOurs {
		return kindOurs
	}
	helm := strings.HasPrefix(d.Labels["helm.sh/chart"], "karpenter-")
	for _, ctr := range d.Spec.Template.Spec.Containers {
		repo, _, _ := strings.Cut(strings.SplitN(ctr.Image, "@", 2)[0]+":", ":")
		if repo == upstreamImage {
			return kindUpstream
		}
		if helm && slices.ContainsFunc(ctr.Env, func(e corev1.EnvVar) bool { return e.Name == "CLEVER_CLOUD_REGION" }) {
			return kindUpstream
		}
	}
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if strings.Contains(strings.ToLower(ctr.Image), "karpenter") {
			return kindOther
		}
	}
	if d.Labels["app.kubernetes.io/name"] == "karpenter" {
		return kindOther
	}
	return kindNone
}

func images(d *appsv1.Deployment) []string {
	var out []string
	for _, c := range d.Spec.Template.Spec.Containers {
		out = append(out, c.Image)
	}
	return out
}

func checkQuota(s *Snapshot) Check {
	c := Check{Name: CheckQuota}
	if s.Quota == nil {
		c.Result, c.Found = Warn, "not counted: NodeGroups unreadable"
		if err := s.errorsFor("quota usage"); err != nil {
			c.Found += " (" + err.Error() + ")"
		}
		return c
	}
	lim, source := quotaUsage(s), "configured in settings.quota"
	if s.Limit.CPU == 0 || s.Limit.GB == 0 {
		source = "CKE's default"
	}
	used := s.Quota.Usage
	room := lim.Sub(used)
	c.Found = fmt.Sprintf("in use %s of %s (%s), control plane included; other clusters of the organisation share the quota and are not visible from here", used, lim, source)
	var largest string
	smallest := quota.Usage{}
	for i, f := range s.Catalog.Flavors() {
		ch := f.QuotaCharge()
		if i == 0 || (ch.CPU <= smallest.CPU && ch.GB <= smallest.GB) {
			smallest = ch
		}
		if ch.FitsIn(room) && (largest == "" || ch.CPU*ch.GB > mustCharge(s, largest).CPU*mustCharge(s, largest).GB) {
			largest = f.Name
		}
	}
	switch {
	case !used.FitsIn(lim) && source != "configured in settings.quota":
		c.Result = Warn
		c.Found += ": more than the default, so the organisation's quota was raised"
		c.Action = "set settings.quota.cpu and settings.quota.memory to the raised quota, so launches fly together instead of being probed one by one"
	case largest == "":
		c.Result = Warn
		c.Found += fmt.Sprintf(": no room left for even the smallest flavor (%s)", smallest)
		c.Action = "if the quota was raised, set settings.quota.cpu and .memory to it; otherwise free quota or ask Clever Cloud for more: Karpenter can launch nothing"
	default:
		c.Result = Pass
		c.Found += fmt.Sprintf(": room for %s, the largest flavor that fits is %s", room, largest)
	}
	return c
}

// mustCharge is a catalogue flavor's quota charge (the flavor is known to exist).
func mustCharge(s *Snapshot, name string) quota.Usage {
	f, _ := s.Catalog.Flavor(name)
	return f.QuotaCharge()
}
