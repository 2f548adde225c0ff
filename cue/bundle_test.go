package bundle_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/load"
	cuejson "cuelang.org/go/encoding/json"
	cueyaml "cuelang.org/go/encoding/yaml"
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/schema/values"
)

// root is the repository root, where cue.mod lives; tests run in cue/.
var root = func() string {
	d, err := filepath.Abs("..")
	if err != nil {
		panic(err)
	}
	return d
}()

func TestMain(m *testing.M) {
	os.Setenv("CUE_REGISTRY", "none") // the module has no dependencies; never reach out
	// The CLI tests run the cue command users run: the version tools/go.mod pins, built here
	// once so that no test's deadline pays for it.
	dir, err := os.MkdirTemp("", "bundle-test-cue")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cueBin = filepath.Join(dir, "cue")
	build := exec.Command("go", "build", "-modfile=tools/go.mod", "-o", cueBin, "cuelang.org/go/cmd/cue")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cue from tools/go.mod: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type renderOpts struct {
	overlay map[string]string // repository-relative path → content
	values  string            // a user values file, YAML, or JSON when it is valid JSON
	tags    []string
	// noSharing turns CUE's structure sharing off (CUE_DEBUG=sharing=0), to tell an
	// evaluator bug from the bundle's own (pins_test.go).
	noSharing bool
}

// load builds one package of the module the way `cue export ./pkg` does.
func loadPkg(t testing.TB, pkg string, o renderOpts) (cue.Value, error) {
	t.Helper()
	cfg := &load.Config{Dir: root, Tags: o.tags, Overlay: map[string]load.Source{}}
	for p, src := range o.overlay {
		cfg.Overlay[filepath.Join(root, p)] = load.FromString(src)
	}
	insts := load.Instances([]string{"./" + pkg}, cfg)
	if len(insts) != 1 {
		t.Fatalf("loading %s: %d instances", pkg, len(insts))
	}
	if insts[0].Err != nil {
		return cue.Value{}, insts[0].Err
	}
	ctx := cuecontext.New()
	if o.noSharing {
		ctx = cuecontext.New(cuecontext.CUE_DEBUG("sharing=0"))
	}
	v := ctx.BuildInstance(insts[0])
	if o.values != "" {
		// As `-l values: FILE` reads a file by its extension: JSON with the JSON decoder.
		var vals cue.Value
		if json.Valid([]byte(o.values)) {
			e, err := cuejson.Extract("values.json", []byte(o.values))
			if err != nil {
				t.Fatalf("parsing values: %v", err)
			}
			vals = ctx.BuildExpr(e)
		} else {
			f, err := cueyaml.Extract("values.yaml", o.values)
			if err != nil {
				t.Fatalf("parsing values: %v", err)
			}
			vals = ctx.BuildFile(f)
		}
		v = v.FillPath(cue.ParsePath("values"), vals)
	}
	// Errors are left to Validate with cue.All, which reports each one at its own path.
	return v, nil
}

// render returns every object of the bundle, in apply order, or the error `cue export` would
// print.
func render(t testing.TB, o renderOpts) ([]map[string]any, error) {
	t.Helper()
	v, err := loadPkg(t, "cue", o)
	if err != nil {
		return nil, err
	}
	// Values first: their errors name the field the user wrote, not a manifest using it.
	if err := v.Validate(cue.Concrete(true), cue.All()); err != nil {
		return nil, err
	}
	list := v.LookupPath(cue.ParsePath("appList"))
	crds := v.LookupPath(cue.ParsePath("crdList"))
	for _, l := range []cue.Value{crds, list} {
		if err := l.Validate(cue.Concrete(true)); err != nil {
			return nil, err
		}
	}
	var out []map[string]any
	for _, l := range []cue.Value{crds, list} {
		var objs []map[string]any
		if err := l.Decode(&objs); err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

func mustRender(t testing.TB, o renderOpts) []map[string]any {
	t.Helper()
	objs, err := render(t, o)
	if err != nil {
		t.Fatalf("rendering: %s", cueerrors.Details(err, nil))
	}
	return objs
}

func find(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objs {
		if o["kind"] == kind && o["metadata"].(map[string]any)["name"] == name {
			return o
		}
	}
	return nil
}

// strict decodes a rendered object into its Go type, failing on any field the type lacks:
// the bundle's objects are typed by the same Go types the apiserver uses.
func strict(obj map[string]any, into any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(into)
}

func typed(kind string) any {
	switch kind {
	case "Namespace":
		return &corev1.Namespace{}
	case "ServiceAccount":
		return &corev1.ServiceAccount{}
	case "ConfigMap":
		return &corev1.ConfigMap{}
	case "Service":
		return &corev1.Service{}
	case "ClusterRole":
		return &rbacv1.ClusterRole{}
	case "ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "Role":
		return &rbacv1.Role{}
	case "RoleBinding":
		return &rbacv1.RoleBinding{}
	case "Deployment":
		return &appsv1.Deployment{}
	case "PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	case "NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "FlowSchema":
		return &flowcontrolv1.FlowSchema{}
	case "CustomResourceDefinition":
		return &apiextensionsv1.CustomResourceDefinition{}
	}
	return nil
}

// everything turns every optional part of the bundle on.
const everything = `
settings:
  logLevel: debug
  topology: DISTRIBUTED
  flavors:
    - name: M
      priceHourly: 0.1
image:
  pullSecrets: [regcred]
serviceMonitor:
  enabled: true
  labels: {release: prometheus}
prometheusRule:
  enabled: true
dashboard:
  enabled: true
networkPolicy:
  enabled: true
  metricsFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
extraEnv:
  - name: KUBE_CLIENT_QPS
    value: "400"
labels: {env: prod}
annotations: {owner: platform}
podAnnotations: {example.com/scrape: "true"}
`

func TestObjectsAreTyped(t *testing.T) {
	for name, o := range map[string]renderOpts{"defaults": {}, "everything": {values: everything}} {
		t.Run(name, func(t *testing.T) {
			objs := mustRender(t, o)
			seen := map[string]bool{}
			for _, obj := range objs {
				kind, _ := obj["kind"].(string)
				meta := obj["metadata"].(map[string]any)
				key := fmt.Sprintf("%s/%v/%v", kind, meta["namespace"], meta["name"])
				if seen[key] {
					t.Errorf("%s rendered twice", key)
				}
				seen[key] = true
				if kind == "ServiceMonitor" || kind == "PrometheusRule" {
					continue // no Go type here; their shapes are checked in TestOptionalObjects and TestPrometheusRule
				}
				into := typed(kind)
				if into == nil {
					t.Errorf("%s: unexpected kind", key)
					continue
				}
				if err := strict(obj, into); err != nil {
					t.Errorf("%s does not decode into its Go type: %v", key, err)
				}
			}
			// CRDs come first so a single apply can create them before their users.
			if objs[0]["kind"] != "CustomResourceDefinition" {
				t.Errorf("first object is %v, want a CRD", objs[0]["kind"])
			}
		})
	}
}

func TestCRDsAreEmbedded(t *testing.T) {
	objs := mustRender(t, renderOpts{})
	for _, name := range []string{"clevernodeclasses.karpenter.clever-cloud.com", "nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "nodeoverlays.karpenter.sh"} {
		if find(objs, "CustomResourceDefinition", name) == nil {
			t.Errorf("CRD %s is missing", name)
		}
	}
	// Ours must be controller-gen's output, unchanged but for the bundle's labels.
	want, err := os.ReadFile(filepath.Join(root, "controller/apis/crds/karpenter.clever-cloud.com_clevernodeclasses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "cue/crds/karpenter.clever-cloud.com_clevernodeclasses.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Error("cue/crds/ is stale: run hack/generate-bundle.sh")
	}
}

func deployment(t *testing.T, objs []map[string]any) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := strict(find(objs, "Deployment", "karpenter"), &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func envOf(d *appsv1.Deployment) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		out[e.Name] = e
	}
	return out
}

// coreEnv are the variables the bundle sets from the pod, not from the settings.
var coreEnv = []string{"SYSTEM_NAMESPACE", "KARPENTER_SERVICE", "MEMORY_LIMIT"}

// TestEnvDefaultsMatchController holds the Deployment's environment to the controller's own
// defaults, except the bundle overrides listed in values.BundleDefaults.
func TestEnvDefaultsMatchController(t *testing.T) {
	env := envOf(deployment(t, mustRender(t, renderOpts{})))
	settings.Walk(func(f settings.Field) {
		want := f.Default
		if v, ok := values.BundleDefaults[f.Path]; ok {
			want = fmt.Sprint(v)
		}
		got, ok := env[f.Env]
		switch {
		case want == "" && ok:
			t.Errorf("%s=%q is set, want it unset (empty default)", f.Env, got.Value)
		case want != "" && !ok:
			t.Errorf("%s is missing, want %q", f.Env, want)
		case ok && got.Value != want:
			t.Errorf("%s=%q, want %q", f.Env, got.Value, want)
		}
	}, &settings.Settings{})
	for name := range env {
		if !slices.Contains(coreEnv, name) && !isSetting(name) {
			t.Errorf("%s is neither a setting nor a core variable", name)
		}
	}

	s := loadSettings(t, env)
	want := settings.Defaults()
	want.Pricing.Enabled = true // values.BundleDefaults
	want.FeatureGates = values.BundleDefaults["featureGates"].(string)
	if !reflect.DeepEqual(s, want) {
		t.Errorf("controller settings from the Deployment:\n%+v\nwant\n%+v", s, want)
	}
}

func isSetting(env string) bool {
	found := false
	settings.Walk(func(f settings.Field) { found = found || f.Env == env }, &settings.Settings{})
	return found
}

// loadSettings starts the controller's settings loader on the Deployment's environment.
func loadSettings(t *testing.T, env map[string]corev1.EnvVar) settings.Settings {
	t.Helper()
	s, err := settings.LoadFrom(func(k string) (string, bool) {
		e, ok := env[k]
		return e.Value, ok && e.ValueFrom == nil
	})
	if err != nil {
		t.Fatalf("the controller rejects the rendered environment: %v", err)
	}
	return s
}

// TestEnvFollowsValues checks that every setting a user changes reaches the controller.
func TestEnvFollowsValues(t *testing.T) {
	objs := mustRender(t, renderOpts{values: `
settings:
  region: par2
  topology: ALL_IN_ONE
  logLevel: debug
  metricsPort: 9090
  healthProbePort: 9091
  disableLeaderElection: true
  batchMaxDuration: 20s
  batchIdleDuration: 2s
  costSteering: false
  costReplacement:
    enabled: false
    minNodeAge: 3h
  featureGates: NodeRepair=true,NodeOverlay=true
  acceptanceTimeout: 2m
  syncOverdueAfter: 5m
  launchGiveUpAfter: 7m
  stoppedLaunchGiveUpAfter: 3m
  pricing:
    enabled: false
    refreshPeriod: 1h
    apiURL: http://prices.example
    kubernetesProductURL: http://products.example/p
    priceSystemURL: http://prices.example/ps
`})
	d := deployment(t, objs)
	s := loadSettings(t, envOf(d))
	want := settings.Settings{
		Region: "par2", Topology: "ALL_IN_ONE", LogLevel: "debug", MetricsPort: 9090, HealthProbePort: 9091,
		DisableLeaderElection:    true,
		BatchMaxDuration:         settings.Duration{Duration: 20 * time.Second},
		BatchIdleDuration:        settings.Duration{Duration: 2 * time.Second},
		CostSteering:             false,
		CostReplacement:          settings.CostReplacement{Enabled: false, MinNodeAge: settings.Duration{Duration: 3 * time.Hour}},
		FeatureGates:             "NodeRepair=true,NodeOverlay=true",
		AcceptanceTimeout:        settings.Duration{Duration: 2 * time.Minute},
		SyncOverdueAfter:         settings.Duration{Duration: 5 * time.Minute},
		LaunchGiveUpAfter:        settings.Duration{Duration: 7 * time.Minute},
		StoppedLaunchGiveUpAfter: settings.Duration{Duration: 3 * time.Minute},
		Pricing: settings.Pricing{
			Enabled: false, RefreshPeriod: settings.Duration{Duration: time.Hour}, APIURL: "http://prices.example",
			KubernetesProductURL: "http://products.example/p", PriceSystemURL: "http://prices.example/ps",
		},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("controller settings:\n%+v\nwant\n%+v", s, want)
	}
	ports := d.Spec.Template.Spec.Containers[0].Ports
	if ports[0].ContainerPort != 9090 || ports[1].ContainerPort != 9091 {
		t.Errorf("container ports %+v do not follow the settings", ports)
	}
	var svc corev1.Service
	if err := strict(find(objs, "Service", "karpenter"), &svc); err != nil || svc.Spec.Ports[0].Port != 9090 {
		t.Errorf("metrics Service port does not follow settings.metricsPort: %+v %v", svc.Spec.Ports, err)
	}
}

func TestDeploymentShape(t *testing.T) {
	d := deployment(t, mustRender(t, renderOpts{}))
	p := d.Spec.Template.Spec
	c := p.Containers[0]
	if c.Image != "ko://github.com/CleverCloud/karpenter-provider-clever-cloud/controller" {
		t.Errorf("image %q", c.Image)
	}
	// A hard selector would leave every replica Pending on a worker-only cluster: placement is
	// affinity only, required off Karpenter's nodes, preferring the control plane.
	if len(p.NodeSelector) != 0 {
		t.Errorf("nodeSelector %v: the default must not pin a node role", p.NodeSelector)
	}
	terms := p.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || terms[0].MatchExpressions[0].Key != "karpenter.sh/nodepool" || terms[0].MatchExpressions[0].Operator != corev1.NodeSelectorOpDoesNotExist {
		t.Errorf("affinity %+v does not keep the controller off Karpenter nodes", terms)
	}
	preferred := p.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution
	if len(preferred) != 1 || !reflect.DeepEqual(preferred[0].Preference.MatchExpressions, []corev1.NodeSelectorRequirement{{
		Key: "clever-cloud.com/cluster-node-role", Operator: corev1.NodeSelectorOpIn, Values: []string{"control-plane"},
	}}) {
		t.Errorf("preferred affinity %+v does not prefer the control-plane nodes", preferred)
	}
	sc := c.SecurityContext
	if sc == nil || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || !*sc.RunAsNonRoot || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v is not restricted", sc)
	}
	if c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.StartupProbe == nil {
		t.Error("probes are not on /healthz and /readyz")
	}
	if p.TopologySpreadConstraints[0].LabelSelector == nil {
		t.Error("topology spread has no labelSelector")
	}
	if _, ok := envOf(d)["FLAVORS_CONFIG_PATH"]; ok {
		t.Error("FLAVORS_CONFIG_PATH set without pins")
	}
}

func TestTagsAndValuesReplaceDefaults(t *testing.T) {
	objs := mustRender(t, renderOpts{
		tags:   []string{"image=registry.example/karpenter:v1", "replicas=1", "namespace=autoscaling", "pricing=false"},
		values: "nodeSelector: {node-role.example/infra: \"true\"}\n",
	})
	d := deployment(t, objs)
	if d.Spec.Template.Spec.Containers[0].Image != "registry.example/karpenter:v1" || *d.Spec.Replicas != 1 || d.Namespace != "autoscaling" {
		t.Errorf("tags not applied: image %s replicas %d namespace %s", d.Spec.Template.Spec.Containers[0].Image, *d.Spec.Replicas, d.Namespace)
	}
	if envOf(d)["PRICING_REFRESH_ENABLED"].Value != "false" {
		t.Error("-t pricing=false not applied")
	}
	if !reflect.DeepEqual(d.Spec.Template.Spec.NodeSelector, map[string]string{"node-role.example/infra": "true"}) {
		t.Errorf("nodeSelector %v: a user's selector is rendered as given", d.Spec.Template.Spec.NodeSelector)
	}
	if a := d.Spec.Template.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("affinity %+v: a user's nodeSelector must keep the default affinity off Karpenter nodes", a)
	}
	if find(objs, "Namespace", "autoscaling") == nil {
		t.Error("namespace tag did not rename the Namespace")
	}
}

// TestAffinityOverrideReplacesDefault: values.cue documents that an affinity replaces the
// default whole (no merge of the preferred control-plane term into a user's own affinity).
func TestAffinityOverrideReplacesDefault(t *testing.T) {
	d := deployment(t, mustRender(t, renderOpts{
		values: "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: node-role.example/infra, operator: Exists}]}]}}}\n",
	}))
	want := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node-role.example/infra", Operator: corev1.NodeSelectorOpExists}},
		}}},
	}}
	if got := d.Spec.Template.Spec.Affinity; !reflect.DeepEqual(got, want) {
		t.Errorf("affinity %+v, want the user's alone %+v", got, want)
	}
}

func TestOptionalObjects(t *testing.T) {
	objs := mustRender(t, renderOpts{values: everything})
	sm := find(objs, "ServiceMonitor", "karpenter")
	if sm == nil || sm["apiVersion"] != "monitoring.coreos.com/v1" {
		t.Fatalf("ServiceMonitor: %v", sm)
	}
	var np networkingv1.NetworkPolicy
	if err := strict(find(objs, "NetworkPolicy", "karpenter"), &np); err != nil {
		t.Fatal(err)
	}
	if len(np.Spec.Egress) != 3 {
		t.Errorf("NetworkPolicy egress: want DNS, API server and price API, got %d rules", len(np.Spec.Egress))
	}
	off := mustRender(t, renderOpts{values: "settings: {pricing: {enabled: false}}\nnetworkPolicy: {enabled: true}\n"})
	if err := strict(find(off, "NetworkPolicy", "karpenter"), &np); err != nil || len(np.Spec.Egress) != 2 {
		t.Errorf("with pricing off the price API egress must go: %d rules %v", len(np.Spec.Egress), err)
	}
	for _, o := range []string{"ServiceMonitor", "NetworkPolicy", "ConfigMap"} {
		if find(mustRender(t, renderOpts{}), o, "karpenter") != nil {
			t.Errorf("%s rendered by default", o)
		}
	}
	if find(mustRender(t, renderOpts{values: "podDisruptionBudget: {enabled: false}\n"}), "PodDisruptionBudget", "karpenter") != nil {
		t.Error("PodDisruptionBudget rendered while disabled")
	}
	// The FlowSchemas name the controller's ServiceAccount wherever values put it.
	moved := mustRender(t, renderOpts{values: "serviceAccount: {name: autoscaler}\n", tags: []string{"namespace=autoscaling"}})
	for _, name := range []string{"karpenter-leader-election", "karpenter-workload"} {
		var fs flowcontrolv1.FlowSchema
		if err := strict(find(moved, "FlowSchema", name), &fs); err != nil {
			t.Fatalf("FlowSchema %s: %v", name, err)
		}
		sa := fs.Spec.Rules[0].Subjects[0].ServiceAccount
		if sa == nil || sa.Name != "autoscaler" || sa.Namespace != "autoscaling" {
			t.Errorf("FlowSchema %s subject %+v, want ServiceAccount autoscaling/autoscaler", name, sa)
		}
	}
	if find(mustRender(t, renderOpts{values: "flowSchemas: {enabled: false}\n"}), "FlowSchema", "karpenter-workload") != nil {
		t.Error("FlowSchemas rendered while disabled")
	}
}

// TestPinChangesPrice is the pin's whole path: flavors/pins.cue → the ConfigMap → the
// controller's overrides parser → the catalogue price, and a pod template that rolls.
func TestPinChangesPrice(t *testing.T) {
	pin := func(price string) renderOpts {
		return renderOpts{overlay: map[string]string{"flavors/pins.cue": "package flavors\n\n#pins: [{name: \"M\", priceHourly: " + price + "}]\n"}}
	}
	objs := mustRender(t, pin("0.1"))
	var cm corev1.ConfigMap
	if err := strict(find(objs, "ConfigMap", "karpenter-flavors"), &cm); err != nil {
		t.Fatalf("flavors ConfigMap: %v", err)
	}
	ovs, err := catalog.ParseOverrides([]byte(cm.Data["flavors.yaml"]))
	if err != nil {
		t.Fatalf("the controller rejects the ConfigMap: %v", err)
	}
	base, err := catalog.LoadBase()
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.New(base, "par", ovs, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	var price float64
	for _, f := range c.Flavors() {
		if f.Name == "M" {
			price = f.PriceHourly
		}
	}
	if price != 0.1 {
		t.Errorf("M's price after the pin is %v, want 0.1", price)
	}

	d := deployment(t, objs)
	env := envOf(d)
	if env["FLAVORS_CONFIG_PATH"].Value != values.FlavorsMountPath+"/flavors.yaml" {
		t.Errorf("FLAVORS_CONFIG_PATH=%q", env["FLAVORS_CONFIG_PATH"].Value)
	}
	if m := d.Spec.Template.Spec.Containers[0].VolumeMounts; len(m) != 1 || m[0].MountPath != values.FlavorsMountPath {
		t.Errorf("volume mounts %+v", m)
	}
	sum := d.Spec.Template.Annotations["karpenter.clever-cloud.com/flavors-checksum"]
	other := deployment(t, mustRender(t, pin("0.2"))).Spec.Template.Annotations["karpenter.clever-cloud.com/flavors-checksum"]
	if sum == "" || sum == other {
		t.Errorf("checksum %q / %q: a pin change must roll the pods", sum, other)
	}
}

// TestBadValues: each bad input fails rendering with an error naming the field.
func TestBadValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    renderOpts
		want []string
	}{
		{"negative pinned price", renderOpts{values: "settings: {flavors: [{name: M, priceHourly: -1}]}"}, []string{"values.settings.flavors.0.priceHourly", "out of bound >=0"}},
		{"unknown field", renderOpts{values: "replica: 3"}, []string{"values.replica", "field not allowed"}},
		{"unknown setting", renderOpts{values: "settings: {regin: par}"}, []string{"values.settings.regin", "field not allowed"}},
		{"metricsPort type", renderOpts{values: "settings: {metricsPort: \"8080\"}"}, []string{"values.settings.metricsPort", "mismatched types string and int"}},
		{"metricsPort range", renderOpts{values: "settings: {metricsPort: 70000}"}, []string{"values.settings.metricsPort", "<=65535"}},
		{"malformed duration", renderOpts{values: "settings: {pricing: {refreshPeriod: 12 hours}}"}, []string{"values.settings.pricing.refreshPeriod", "out of bound"}},
		{"log level", renderOpts{values: "settings: {logLevel: trace}"}, []string{"values.settings.logLevel"}},
		{"bad url", renderOpts{values: "settings: {pricing: {apiURL: \"ftp://x\"}}"}, []string{"values.settings.pricing.apiURL"}},
		{"lowercase flavor", renderOpts{values: "settings: {flavors: [{name: m}]}"}, []string{"values.settings.flavors.0.name"}},
		{"extraEnv shadows a setting", renderOpts{values: "extraEnv: [{name: LOG_LEVEL, value: debug}]"}, []string{"values.extraEnv.0.name", `!="LOG_LEVEL"`}},
		{"bad pin in flavors/", renderOpts{overlay: map[string]string{"flavors/pins.cue": "package flavors\n#pins: [{name: \"M\", priceHourly: -0.5}]\n"}}, []string{"priceHourly: invalid value -0.5 (out of bound >=0)", "flavors/pins.cue"}},
		{"flavor pinned twice", renderOpts{overlay: map[string]string{"flavors/pins.cue": "package flavors\n#pins: [{name: \"M\", priceHourly: 0.1}]\n"}, values: "settings: {flavors: [{name: M, cpu: 12}]}"}, []string{"values.settings.flavors.0: flavor M is pinned twice, first at #pins.0 in flavors/pins.cue"}},
		{"unknown pin field", renderOpts{overlay: map[string]string{"flavors/pins.cue": "package flavors\n#pins: [{name: \"M\", price: 1}]\n"}}, []string{"_pinned.0.pin.price: field not allowed", "#pins.0 in flavors/pins.cue: price: not a field of a flavor override"}},
		{"new flavor without sizes", renderOpts{values: "settings: {flavors: [{name: NEW, cpu: 2}]}"}, []string{"values.settings.flavors.0: flavor NEW is not in the base catalogue", "missing memoryKi, priceHourly"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := render(t, tc.o)
			if err == nil {
				t.Fatal("rendered without error")
			}
			msg := cueerrors.Details(err, nil)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not mention %q:\n%s", w, msg)
				}
			}
		})
	}
}

// TestBaseCatalogueIsFlavorsExport proves the controller embeds exactly `cue export ./flavors`.
func TestBaseCatalogueIsFlavorsExport(t *testing.T) {
	v, err := loadPkg(t, "flavors", renderOpts{})
	if err != nil {
		t.Fatal(cueerrors.Details(err, nil))
	}
	exported, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(cueerrors.Details(err, nil))
	}
	decode := func(b []byte) catalog.Base {
		var base catalog.Base
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&base); err != nil {
			t.Fatal(err)
		}
		return base
	}
	got, want := decode(catalog.BaseJSON()), decode(exported)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("controller/catalog/base.json is stale: run hack/generate-bundle.sh\nembedded %+v\nexported %+v", got, want)
	}
	for _, f := range want.Flavors {
		if p := catalog.PriceFor(f.CPU, f.NominalGB, want.Rates); p != f.PriceHourly {
			t.Errorf("%s: price %v, the controller's formula gives %v", f.Name, f.PriceHourly, p)
		}
	}
}

// TestRateChangeReprices: prices are derived, so changing a rate reprices every flavor.
func TestRateChangeReprices(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "flavors/catalogue.cue"))
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(src), "vcpuHourly:  0.00277777777", "vcpuHourly:  0.01", 1)
	if changed == string(src) {
		t.Fatal("rate line not found in flavors/catalogue.cue")
	}
	v, err := loadPkg(t, "flavors", renderOpts{overlay: map[string]string{"flavors/catalogue.cue": changed}})
	if err != nil {
		t.Fatal(cueerrors.Details(err, nil))
	}
	var base catalog.Base
	if err := v.Decode(&base); err != nil {
		t.Fatal(err)
	}
	for _, f := range base.Flavors {
		if want := catalog.PriceFor(f.CPU, f.NominalGB, base.Rates); f.PriceHourly != want {
			t.Errorf("%s: price %v after the rate change, want %v", f.Name, f.PriceHourly, want)
		}
	}
}

// TestOutIsCurrent: out/ must be what the bundle renders with default values.
func TestOutIsCurrent(t *testing.T) {
	start := time.Now()
	v, err := loadPkg(t, "cue", renderOpts{})
	if err != nil {
		t.Fatal(cueerrors.Details(err, nil))
	}
	for file, expr := range map[string]string{"out/crds.yaml": "crdStream", "out/karpenter.yaml": "appStream"} {
		s, err := v.LookupPath(cue.ParsePath(expr)).String()
		if err != nil {
			t.Fatal(cueerrors.Details(err, nil))
		}
		disk, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(disk)) != strings.TrimSpace(s) {
			t.Errorf("%s is stale: run hack/generate-bundle.sh", file)
		}
	}
	t.Logf("bundle rendered in %v", time.Since(start))
}

// TestCUEFormattedAndVetted is `cue fmt --check` and `cue vet -c` of every package.
func TestCUEFormattedAndVetted(t *testing.T) {
	for _, pkg := range []string{"cue", "flavors", "schema"} {
		files, _ := filepath.Glob(filepath.Join(root, pkg, "*.cue"))
		if len(files) == 0 {
			t.Errorf("no CUE files in %s", pkg)
		}
		for _, f := range files {
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			formatted, err := format.Source(src)
			if err != nil {
				t.Errorf("%s: %v", f, err)
			} else if !bytes.Equal(src, formatted) {
				t.Errorf("%s is not cue-formatted: run cue fmt ./%s", f, pkg)
			}
		}
		v, err := loadPkg(t, pkg, renderOpts{})
		if err != nil {
			t.Errorf("%s: %s", pkg, cueerrors.Details(err, nil))
			continue
		}
		if err := v.Validate(cue.Concrete(pkg != "schema")); err != nil {
			t.Errorf("cue vet ./%s: %s", pkg, cueerrors.Details(err, nil))
		}
	}
}

func BenchmarkRender(b *testing.B) {
	for b.Loop() {
		mustRender(b, renderOpts{})
	}
}
