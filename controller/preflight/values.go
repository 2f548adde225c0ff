package preflight

import (
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// entry is one key of the values file, with the comment that explains the choice: a leaf
// value, or a mapping of entries.
type entry struct {
	key      string
	comment  []string
	value    any
	children []*entry
}

// Values is a values file for `cue export ./cue -l values: FILE`, built from a snapshot.
type Values struct {
	// source names the cluster, version its Kubernetes version, for the header.
	source, version string
	// image is the controller image written as image.reference, empty when the render gives it.
	image   string
	entries []*entry
}

// SetImage writes ref as image.reference, the image the bundle's Deployment runs, with why as
// its comment, beside the pull secrets already chosen.
func (v *Values) SetImage(ref, why string) {
	v.image = ref
	e := &entry{key: "reference", value: ref}
	comment := []string{why, "The render needs no -t image= then; a different one conflicts with this."}
	for _, o := range v.entries {
		if o.key == "image" {
			o.comment, o.children = comment, append([]*entry{e}, o.children...)
			return
		}
	}
	v.entries = append(v.entries, &entry{key: "image", comment: comment, children: []*entry{e}})
}

// RenderCommand is the cue command that renders the install from the values file, the image
// placeholder included when the file carries no image.
func (v *Values) RenderCommand(file string) string {
	image := ""
	if v.image == "" {
		image = " -t image=REGISTRY/NAME@sha256:DIGEST"
	}
	return "cue export ./cue -l values: " + file + image + " -e stream --out text >install.yaml"
}

// Write renders the values file as YAML, each choice under its comment.
func (v *Values) Write(w io.Writer) error {
	var b strings.Builder
	header := []string{
		"Values for the karpenter-clevercloud bundle, written by `karpenter-clevercloud values`",
		fmt.Sprintf("from %s (Kubernetes %s). Render with:", v.source, v.version),
		"  " + v.RenderCommand("THIS_FILE"),
		"Each choice below says what in the cluster it comes from; everything else keeps the",
		"bundle's default (cue/values.cue, schema/values.schema.json).",
	}
	for _, h := range header {
		b.WriteString(strings.TrimRight("# "+h, " ") + "\n")
	}
	for _, e := range v.entries {
		b.WriteString("\n")
		if err := e.render(&b, ""); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (e *entry) render(b *strings.Builder, indent string) error {
	for _, c := range e.comment {
		b.WriteString(strings.TrimRight(indent+"# "+c, " ") + "\n")
	}
	if e.children != nil {
		b.WriteString(indent + e.key + ":\n")
		for _, c := range e.children {
			if err := c.render(b, indent+"  "); err != nil {
				return err
			}
		}
		return nil
	}
	out, err := yaml.Marshal(map[string]any{e.key: e.value})
	if err != nil {
		return fmt.Errorf("encoding values key %s: %w", e.key, err)
	}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		b.WriteString(indent + line + "\n")
	}
	return nil
}

// Upstream's chart defaults, to carry over only what a user changed.
var (
	upstreamNodeSelector = map[string]string{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane}
	upstreamResources    = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
)

// Environment variables upstream's chart sets from the pod rather than from values: the
// bundle sets its own.
var upstreamPodEnv = []string{"SYSTEM_NAMESPACE", "LEADER_ELECTION_NAMESPACE", "MEMORY_LIMIT", "FLAVORS_CONFIG_PATH", "KARPENTER_SERVICE"}

// BuildValues derives a values file from what the snapshot shows: placement for the cluster's
// topology, the flavors its CRD serves, the region, and the upstream provider's Helm values
// where its install is found. source names the cluster in the header.
func BuildValues(s *Snapshot, source string) *Values {
	v := &Values{source: source, version: s.Version.GitVersion}
	st := &entry{key: "settings", children: []*entry{}}
	v.entries = append(v.entries, st)
	st.children = append(st.children, regionEntry(s))
	if e := flavorsEntry(s); e != nil {
		st.children = append(st.children, e)
	}
	if s.Quota != nil {
		if e := quotaComment(s); e != nil {
			st.comment = append(st.comment, e...)
		}
	}
	var up *UpstreamInstall
	if s.Upstream != nil && s.Upstream.Deployment != nil {
		up = s.Upstream
		st.children = append(st.children, upstreamSettings(up.Deployment)...)
	}
	v.entries = append(v.entries, placementEntries(s, up)...)
	if up != nil {
		v.entries = append(v.entries, upstreamPod(up)...)
	}
	return v
}

func regionEntry(s *Snapshot) *entry {
	if s.Upstream != nil {
		for _, c := range s.Upstream.Deployment.Spec.Template.Spec.Containers {
			for _, e := range c.Env {
				if e.Name == "CLEVER_CLOUD_REGION" && e.Value != "" {
					return &entry{key: "region", value: e.Value, comment: []string{"The upstream provider's settings.region."}}
				}
			}
		}
	}
	for _, n := range s.Nodes {
		if r := n.Labels[corev1.LabelTopologyRegion]; r != "" && n.Labels[karpv1.NodePoolLabelKey] != "" {
			return &entry{key: "region", value: r, comment: []string{"The region Karpenter registered node " + n.Name + " in."}}
		}
	}
	return &entry{key: "region", value: "par", comment: []string{"No node or install names a region: CKE's only one, Paris."}}
}

func flavorsEntry(s *Snapshot) *entry {
	served := ServedFlavors(s.NodeGroupCRD)
	var catalogue []string
	for _, f := range s.Catalog.Flavors() {
		catalogue = append(catalogue, f.Name)
	}
	var comment []string
	switch {
	case len(served) == 0:
		comment = append(comment, "The NodeGroup CRD lists no flavors: the catalogue's "+strings.Join(catalogue, ", ")+" are offered as they are.")
	case len(without(served, catalogue)) == 0 && len(without(catalogue, served)) == 0:
		comment = append(comment, "The NodeGroup CRD accepts "+strings.Join(served, ", ")+", all sized by the catalogue: nothing to add.")
	default:
		if u := without(served, catalogue); len(u) > 0 {
			comment = append(comment, "The NodeGroup CRD accepts "+strings.Join(u, ", ")+", which the catalogue cannot size: to use one, add it",
				"here with its cpu, memoryKi (what the kernel reports) and priceHourly.")
		}
		if r := without(catalogue, served); len(r) > 0 {
			comment = append(comment, "The CRD refuses "+strings.Join(r, ", ")+": keep them out of your NodePools' instance types.")
		}
	}
	if s.Upstream == nil || len(s.Upstream.Flavors) == 0 {
		// A comment alone: settings.flavors keeps its default (none).
		return &entry{key: "flavors", value: []catalog.Override{}, comment: comment}
	}
	comment = append(comment, "The upstream provider's settings.flavors, carried over entry by entry.")
	return &entry{key: "flavors", value: s.Upstream.Flavors, comment: comment}
}

func quotaComment(s *Snapshot) []string {
	used := s.Quota.Usage
	if used.FitsIn(quotaUsage(s)) {
		return []string{fmt.Sprintf("The cluster uses %s of the organisation quota; settings.quota is left to CKE's default.", used)}
	}
	return []string{
		fmt.Sprintf("The cluster uses %s, more than CKE's default quota: the organisation's was raised.", used),
		"Set settings.quota.cpu and .memory to it (the cluster cannot tell its value).",
	}
}

// quotaUsage is the limit in force as an amount: the configured one, CKE's default where unset.
func quotaUsage(s *Snapshot) quota.Usage {
	u := quota.Usage{CPU: s.Limit.CPU, GB: s.Limit.GB}
	if u.CPU == 0 {
		u.CPU = quota.DefaultLimit.CPU
	}
	if u.GB == 0 {
		u.GB = quota.DefaultLimit.GB
	}
	return u
}

// placementEntries chooses the placement for the cluster's topology. The bundle's default
// fits both topologies; the file states it so that it documents what the cluster showed.
func placementEntries(s *Snapshot, up *UpstreamInstall) []*entry {
	p := DefaultPlacement()
	var spec *corev1.PodSpec
	if up != nil {
		spec = &up.Deployment.Spec.Template.Spec
	}
	var out []*entry
	aff := p.Spec.Affinity.DeepCopy()
	var why []string
	if spec != nil && spec.Affinity != nil && !equality.Semantic.DeepEqual(*spec.Affinity, corev1.Affinity{}) {
		aff = withOffKarpenter(spec.Affinity)
		why = append(why, "The upstream provider's affinity, each required term also keeping off nodes Karpenter manages.")
	} else if s.HasControlPlaneNodes() {
		why = append(why, "The cluster shows control-plane nodes: off Karpenter's nodes, preferring those.")
	} else {
		why = append(why, "Worker-only cluster (no control-plane Node): off Karpenter's nodes, on its other workers; the",
			"control-plane preference stays for clusters that show one later.")
	}
	tolerations := slices.Clone(p.Spec.Tolerations)
	var nodeSelector map[string]string
	if spec != nil {
		switch {
		case len(spec.NodeSelector) == 0:
		case reflect.DeepEqual(spec.NodeSelector, upstreamNodeSelector):
			why = append(why, "The upstream provider's control-plane nodeSelector is dropped: the preference above replaces it and",
				"works where no control-plane node shows.")
		default:
			nodeSelector = spec.NodeSelector
		}
		for _, t := range spec.Tolerations {
			if !slices.ContainsFunc(tolerations, func(o corev1.Toleration) bool { return o.MatchToleration(&t) }) {
				tolerations = append(tolerations, t)
			}
		}
	}
	probe := Placement{Source: "these values", Replicas: p.Replicas, Spec: *p.Spec.DeepCopy()}
	probe.Spec.Affinity, probe.Spec.Tolerations, probe.Spec.NodeSelector = aff, tolerations, nodeSelector
	verdict := s.Place(probe)
	switch {
	case len(verdict.Eligible) == 0:
		why = append(why, "WARNING: no node of the cluster can run the controller with this placement today: add a",
			"NodeGroup Karpenter does not manage (one S node is enough) before installing.")
	default:
		why = append(why, "Eligible now: "+strings.Join(limit(verdict.Eligible, 5), ", ")+".")
	}
	out = append(out, &entry{key: "affinity", value: aff, comment: why})
	if nodeSelector != nil {
		out = append(out, &entry{key: "nodeSelector", value: nodeSelector, comment: []string{"The upstream provider's nodeSelector."}})
	}
	tc := []string{"The control-plane taints, tolerated in case the cluster sets them."}
	if len(tolerations) > len(p.Spec.Tolerations) {
		tc = append(tc, "Plus the upstream provider's tolerations.")
	}
	out = append(out, &entry{key: "tolerations", value: tolerations, comment: tc})
	return out
}

// withOffKarpenter returns a copy of a with karpenter.sh/nodepool DoesNotExist in every required
// term: whatever else a user chose, the controller must never run on a node it can consolidate.
func withOffKarpenter(a *corev1.Affinity) *corev1.Affinity {
	out := a.DeepCopy()
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	req := out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if req == nil || len(req.NodeSelectorTerms) == 0 {
		out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{*DefaultRequiredAffinity.DeepCopy()}}
		return out
	}
	for i := range req.NodeSelectorTerms {
		t := &req.NodeSelectorTerms[i]
		if !slices.ContainsFunc(t.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == karpv1.NodePoolLabelKey && r.Operator == corev1.NodeSelectorOpDoesNotExist
		}) {
			t.MatchExpressions = append(t.MatchExpressions, DefaultRequiredAffinity.MatchExpressions...)
		}
	}
	return out
}

// upstreamSettings maps the upstream Deployment's environment to settings, every variable
// through the settings type's own env tags; the values upstream's chart sets by default and
// ours does differently are called out.
func upstreamSettings(d *appsv1.Deployment) []*entry {
	fields := settingsByEnv()
	env := map[string]string{}
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				env[e.Name] = e.Value
			}
		}
	}
	from := fmt.Sprintf("the upstream Deployment %s/%s", d.Namespace, d.Name)
	byKey := map[string]*entry{}
	var top []*entry
	put := func(path []string, value any, comment ...string) {
		if len(path) == 1 {
			top = append(top, &entry{key: path[0], value: value, comment: comment})
			return
		}
		parent := byKey[path[0]]
		if parent == nil {
			parent = &entry{key: path[0], children: []*entry{}}
			byKey[path[0]] = parent
			top = append(top, parent)
		}
		parent.children = append(parent.children, &entry{key: path[1], value: value, comment: comment})
	}
	names := slices.Sorted(maps.Keys(env))
	for _, name := range names {
		f, ok := fields[name]
		if !ok || name == "CLEVER_CLOUD_REGION" {
			continue
		}
		raw := env[name]
		if raw == f.def {
			continue // what the bundle sets anyway
		}
		var value any = raw
		switch f.kind {
		case reflect.Int:
			n, err := strconv.Atoi(raw)
			if err != nil {
				continue
			}
			value = n
		case reflect.Bool:
			b, err := strconv.ParseBool(raw)
			if err != nil {
				continue
			}
			value = b
		}
		switch name {
		case "FEATURE_GATES":
			if raw == "NodeRepair=false" {
				continue // upstream's default; the bundle's default says the same and more
			}
			if !strings.Contains(raw, "ReservedCapacity=") {
				value = raw + ",ReservedCapacity=false"
			}
			put(f.path, value, "From "+from+" ("+raw+"); ReservedCapacity stays off as the bundle has it: CKE sells no reservations.")
		case "CLEVER_CLOUD_TOPOLOGY":
			if raw == "" || raw == "DISTRIBUTED" {
				continue // upstream's chart sets its default whenever pricing is on
			}
			put(f.path, value, "From "+from+": restricts the catalogue to one topology's product listing.")
		default:
			put(f.path, value, "From "+from+" ("+name+").")
		}
	}
	if _, on := env["PRICING_REFRESH_ENABLED"]; !on {
		put([]string{"pricing", "enabled"}, false, "The upstream provider ran without the price refresher (PRICING_REFRESH_ENABLED unset).")
	}
	return top
}

// upstreamPod carries over the pod-level Helm values of upstream's Deployment that differ from
// upstream's chart defaults.
func upstreamPod(up *UpstreamInstall) []*entry {
	d := up.Deployment
	spec := d.Spec.Template.Spec
	from := fmt.Sprintf("From the upstream Deployment %s/%s.", d.Namespace, d.Name)
	var out []*entry
	if d.Spec.Replicas != nil && *d.Spec.Replicas > 1 {
		out = append(out, &entry{key: "replicas", value: *d.Spec.Replicas, comment: []string{from}})
	}
	if d.Spec.RevisionHistoryLimit != nil && *d.Spec.RevisionHistoryLimit != 10 {
		out = append(out, &entry{key: "revisionHistoryLimit", value: *d.Spec.RevisionHistoryLimit, comment: []string{from}})
	}
	if spec.PriorityClassName != "" && spec.PriorityClassName != "system-cluster-critical" {
		out = append(out, &entry{key: "priorityClassName", value: spec.PriorityClassName, comment: []string{from}})
	}
	if len(spec.TopologySpreadConstraints) > 0 {
		out = append(out, &entry{key: "topologySpreadConstraints", value: spec.TopologySpreadConstraints, comment: []string{from}})
	}
	if len(spec.Containers) > 0 {
		r := spec.Containers[0].Resources
		if !equality.Semantic.DeepEqual(r, upstreamResources) && (len(r.Requests) > 0 || len(r.Limits) > 0) {
			out = append(out, &entry{key: "resources", value: r, comment: []string{from + " (controller.resources)"}})
		}
		var extra []corev1.EnvVar
		fields := settingsByEnv()
		for _, e := range spec.Containers[0].Env {
			if _, isSetting := fields[e.Name]; !isSetting && !slices.Contains(upstreamPodEnv, e.Name) {
				extra = append(extra, e)
			}
		}
		if len(extra) > 0 {
			out = append(out, &entry{key: "extraEnv", value: extra, comment: []string{from + " (controller.env)"}})
		}
	}
	if len(spec.ImagePullSecrets) > 0 {
		var names []string
		for _, s := range spec.ImagePullSecrets {
			names = append(names, s.Name)
		}
		out = append(out, &entry{key: "image",
			children: []*entry{{key: "pullSecrets", value: names, comment: []string{from + " (imagePullSecrets)"}}},
			comment:  []string{"The upstream image is not carried: pass this provider's with values --image, or -t image= at render."}})
	}
	if labels := trimmed(d.Spec.Template.Labels, "app.kubernetes.io/name", "app.kubernetes.io/instance"); len(labels) > 0 {
		out = append(out, &entry{key: "podLabels", value: labels, comment: []string{from}})
	}
	if ann := trimmed(d.Spec.Template.Annotations, "checksum/flavors"); len(ann) > 0 {
		out = append(out, &entry{key: "podAnnotations", value: ann, comment: []string{from}})
	}
	if labels := trimmed(d.Labels, "helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"); len(labels) > 0 {
		out = append(out, &entry{key: "labels", value: labels, comment: []string{from + " (additionalLabels)"}})
	}
	if ann := trimmed(up.ServiceAccountAnnotations); len(ann) > 0 {
		out = append(out, &entry{key: "serviceAccount", children: []*entry{{key: "annotations", value: ann}}, comment: []string{from + " ServiceAccount annotations."}})
	}
	return out
}

// trimmed returns m without the given keys; nil when nothing is left.
func trimmed(m map[string]string, drop ...string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !slices.Contains(drop, k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
