package preflight_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/yaml"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cli"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/preflight"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/cke"
)

// group creates a NodeGroup as manager, with labels.
func (w *world) group(name, flavor string, nodes int32, labels map[string]string, manager string) *ngv1.NodeGroup {
	w.t.Helper()
	g := &ngv1.NodeGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: ngv1.NodeGroupSpec{Flavor: flavor, NodeCount: nodes}}
	w.create(g, manager)
	return g
}

// karpenterNode is a node Karpenter registered: its NodePool label.
var karpenterNode = map[string]string{karpv1.NodePoolLabelKey: "default", corev1.LabelTopologyRegion: "par"}

// workerOnly builds the worker-only topology: no control-plane Node, a pre-existing 2 × S
// group Karpenter does not manage, and one Karpenter node.
func (w *world) workerOnly() {
	w.group("pool", "S", 2, nil, "clever-cloud-console")
	w.node("pool-node0", "pool", "S", nil)
	w.node("pool-node1", "pool", "S", nil)
	w.group("default-abcde", "XS", 1, map[string]string{v1alpha1.LabelNodeClaim: "default-abcde"}, "karpenter-clevercloud")
	w.node("default-abcde-node0", "default-abcde", "XS", karpenterNode)
}

// The default placement on a worker-only cluster: the controller goes to the unmanaged pool's
// workers, never the Karpenter node; the old hard control-plane selector would leave it
// nowhere. Every other check passes on the simulated CKE: exit 0.
func TestWorkerOnlyTopology(t *testing.T) {
	w := newWorld(t)
	w.workerOnly()
	s, r := w.preflight(nil)
	place := w.check(r, preflight.CheckPlacement)
	w.g.Expect(place.Result).To(Equal(preflight.Pass))
	w.g.Expect(place.Found).To(ContainSubstring("worker-only"))
	v := s.Place(preflight.DefaultPlacement())
	w.g.Expect(v.Eligible).To(Equal([]string{"pool-node0", "pool-node1"}))
	w.g.Expect(v.Refused).To(HaveKeyWithValue("managed by Karpenter", []string{"default-abcde-node0"}))
	for _, c := range r {
		w.g.Expect(c.Result).To(Equal(preflight.Pass), "%s: %s", c.Name, c.Found)
	}
	w.g.Expect(r.ExitCode()).To(Equal(preflight.ExitOK))

	// What the bundle rendered before: a control-plane nodeSelector. No node takes it here.
	old := preflight.DefaultPlacement()
	old.Spec.NodeSelector = map[string]string{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane}
	_, r = w.preflight(&old)
	w.g.Expect(w.check(r, preflight.CheckPlacement).Result).To(Equal(preflight.Fail))
	w.g.Expect(r.ExitCode()).To(Equal(preflight.ExitFail))

	values, rendered := w.values(s)
	w.g.Expect(values).To(ContainSubstring("Worker-only cluster"))
	w.g.Expect(values).To(ContainSubstring("Eligible now: pool-node0, pool-node1"))
	w.g.Expect(values).To(ContainSubstring("region: par"))
	d := renderedDeployment(w, rendered)
	w.g.Expect(d.Spec.Template.Spec.NodeSelector).To(BeEmpty())
	w.g.Expect(d.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms).To(
		Equal([]corev1.NodeSelectorTerm{preflight.DefaultRequiredAffinity}))
}

// With control-plane nodes, the controller prefers them, tainted or not.
func TestControlPlaneTopology(t *testing.T) {
	w := newWorld(t)
	w.node("control-plane-0", "", "S", nil, corev1.Taint{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule})
	w.node("control-plane-1", "", "S", nil)
	w.group("default-fghij", "XS", 1, map[string]string{v1alpha1.LabelNodeClaim: "default-fghij"}, "karpenter-clevercloud")
	w.node("default-fghij-node0", "default-fghij", "XS", karpenterNode)
	s, r := w.preflight(nil)
	place := w.check(r, preflight.CheckPlacement)
	w.g.Expect(place.Result).To(Equal(preflight.Pass))
	w.g.Expect(place.Found).To(ContainSubstring("preferred node(s) control-plane-0, control-plane-1"))
	w.g.Expect(r.ExitCode()).To(Equal(preflight.ExitOK))
	// The control plane counts in the quota: 2 × S and one XS.
	w.g.Expect(w.check(r, preflight.CheckQuota).Found).To(ContainSubstring("in use 22 vCPU / 32 GB of 40 vCPU / 40 GB"))

	values, _ := w.values(s)
	w.g.Expect(values).To(ContainSubstring("The cluster shows control-plane nodes"))
	w.g.Expect(values).To(ContainSubstring("Eligible now: control-plane-0, control-plane-1"))
}

// Only Karpenter's nodes: nowhere to run, the check fails and says what to do.
func TestNoNodeForTheController(t *testing.T) {
	w := newWorld(t)
	w.group("default-klmno", "XS", 1, map[string]string{v1alpha1.LabelNodeClaim: "default-klmno"}, "karpenter-clevercloud")
	w.node("default-klmno-node0", "default-klmno", "XS", karpenterNode)
	s, r := w.preflight(nil)
	place := w.check(r, preflight.CheckPlacement)
	w.g.Expect(place.Result).To(Equal(preflight.Fail))
	w.g.Expect(place.Action).To(ContainSubstring("add a NodeGroup Karpenter does not manage"))
	w.g.Expect(r.ExitCode()).To(Equal(preflight.ExitFail))
	values, _ := w.values(s)
	w.g.Expect(values).To(ContainSubstring("WARNING: no node of the cluster can run the controller"))
}

// A NodeGroup resized by something other than the provider: an unmanaged group resized by
// another field manager warns and names it; a Karpenter group holding two nodes fails.
func TestNodeGroupResizedOutOfBand(t *testing.T) {
	w := newWorld(t)
	w.node("control-plane-0", "", "S", nil)
	g := w.group("pool", "S", 1, nil, "clever-cloud-console")
	_, r := w.preflight(nil)
	w.g.Expect(w.check(r, preflight.CheckCKEAutoscaler).Result).To(Equal(preflight.Pass))
	w.g.Expect(w.check(r, preflight.CheckCKEAutoscaler).Found).To(ContainSubstring("autoscalingEnabled is a cluster setting the NodeGroup API does not show"))

	w.g.Expect(kube.Patch(w.ctx, g, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"nodeCount":3}}`)), client.FieldOwner("cke-autoscaler"))).To(Succeed())
	_, r = w.preflight(nil)
	c := w.check(r, preflight.CheckCKEAutoscaler)
	w.g.Expect(c.Result).To(Equal(preflight.Warn))
	w.g.Expect(c.Found).To(ContainSubstring(`pool (not Karpenter's, now 3 nodes) was resized after creation by "cke-autoscaler"`))
	w.g.Expect(r.ExitCode()).To(Equal(preflight.ExitWarn))

	w.group("default-pqrst", "XS", 2, map[string]string{v1alpha1.LabelNodeClaim: "default-pqrst"}, "karpenter-clevercloud")
	_, r = w.preflight(nil)
	c = w.check(r, preflight.CheckCKEAutoscaler)
	w.g.Expect(c.Result).To(Equal(preflight.Fail))
	w.g.Expect(c.Found).To(ContainSubstring("default-pqrst asks for 2 nodes"))
	w.g.Expect(c.Action).To(ContainSubstring("set their nodeCount back to 1"))
}

// upstreamInstall creates what the upstream provider's Helm charts leave: its Deployment (its
// chart's labels and image, its settings as variables, its control-plane nodeSelector), the
// flavors ConfigMap and the ServiceAccount.
func (w *world) upstreamInstall(ns string, replicas int32) *appsv1.Deployment {
	w.namespace(ns)
	w.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "karpenter", Namespace: ns, Annotations: map[string]string{"example.com/role": "autoscaler"}}}, "helm")
	w.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "karpenter-flavors", Namespace: ns}, Data: map[string]string{
		"flavors.yaml": "- name: M\n  priceHourly: 0.12\n",
	}}, "helm")
	selector := map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "karpenter", Namespace: ns, Labels: map[string]string{
			"helm.sh/chart": "karpenter-0.12.0", "app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter",
			"app.kubernetes.io/managed-by": "Helm", "team": "platform",
		}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec: corev1.PodSpec{
					ServiceAccountName: "karpenter",
					ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "registry-credentials"}},
					NodeSelector:       map[string]string{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane},
					PriorityClassName:  "system-cluster-critical",
					Containers: []corev1.Container{{
						Name: "controller", Image: "ghcr.io/clevercloud/karpenter:0.12.0",
						Env: []corev1.EnvVar{
							{Name: "CLEVER_CLOUD_REGION", Value: "par"},
							{Name: "LOG_LEVEL", Value: "debug"},
							{Name: "METRICS_PORT", Value: "8080"},
							{Name: "HEALTH_PROBE_PORT", Value: "8081"},
							{Name: "SYSTEM_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							{Name: "BATCH_MAX_DURATION", Value: "20s"},
							{Name: "FEATURE_GATES", Value: "NodeRepair=true"},
							{Name: "PRICING_REFRESH_ENABLED", Value: "true"},
							{Name: "PRICING_REFRESH_PERIOD", Value: "6h"},
							{Name: "PRICING_API_URL", Value: "https://api.clever-cloud.com"},
							{Name: "CLEVER_CLOUD_TOPOLOGY", Value: "DISTRIBUTED"},
							{Name: "HTTPS_PROXY", Value: "http://proxy.example:3128"},
						},
					}},
				},
			},
		},
	}
	w.create(d, "helm")
	return d
}

// The upstream provider installed and running: other-karpenter fails naming it; scaled to 0
// it warns. The values carry its Helm values over, drop its control-plane selector on a
// worker-only cluster, and render.
func TestUpstreamProviderInstalled(t *testing.T) {
	w := newWorld(t)
	w.workerOnly()
	w.upstreamInstall("upstream", 1)
	s, r := w.preflight(nil)
	c := w.check(r, preflight.CheckOtherKarpenter)
	w.g.Expect(c.Result).To(Equal(preflight.Fail))
	w.g.Expect(c.Found).To(ContainSubstring("the upstream provider upstream/karpenter (ghcr.io/clevercloud/karpenter:0.12.0)"))
	w.g.Expect(s.Upstream).NotTo(BeNil())

	values, rendered := w.values(s)
	w.t.Logf("values:\n%s", values)
	w.g.Expect(values).To(ContainSubstring("control-plane nodeSelector is dropped"))
	d := renderedDeployment(w, rendered)
	env := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	w.g.Expect(env).To(HaveKeyWithValue("LOG_LEVEL", "debug"))
	w.g.Expect(env).To(HaveKeyWithValue("BATCH_MAX_DURATION", "20s"))
	w.g.Expect(env).To(HaveKeyWithValue("FEATURE_GATES", "NodeRepair=true,ReservedCapacity=false"))
	w.g.Expect(env).To(HaveKeyWithValue("PRICING_REFRESH_PERIOD", "6h"))
	w.g.Expect(env).To(HaveKeyWithValue("HTTPS_PROXY", "http://proxy.example:3128"))
	w.g.Expect(env).To(HaveKey("FLAVORS_CONFIG_PATH"), "upstream's flavors carried into settings.flavors")
	w.g.Expect(env).NotTo(HaveKey("CLEVER_CLOUD_TOPOLOGY"), "upstream's default topology is not carried")
	w.g.Expect(d.Spec.Template.Spec.NodeSelector).To(BeEmpty())
	w.g.Expect(d.Labels).To(HaveKeyWithValue("team", "platform"))
	w.g.Expect(rendered).To(ContainSubstring("example.com/role: autoscaler"))
	w.g.Expect(d.Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "registry-credentials"}}))

	// An image given to values goes beside upstream's pull secrets, in the same image mapping.
	const image = "registry.example.com/karpenter/controller:v1.2.3"
	values, rendered = w.values(s, func(v *preflight.Values) { v.SetImage(image, "Given with --image.") })
	w.g.Expect(strings.Count(values, "\nimage:\n")).To(Equal(1), values)
	d = renderedDeployment(w, rendered)
	w.g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
	w.g.Expect(d.Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "registry-credentials"}}))

	// Scaled to zero: installed, not running.
	upstream := &appsv1.Deployment{}
	w.g.Expect(kube.Get(w.ctx, client.ObjectKey{Namespace: "upstream", Name: "karpenter"}, upstream)).To(Succeed())
	upstream.Spec.Replicas = ptr.To[int32](0)
	w.g.Expect(kube.Update(w.ctx, upstream)).To(Succeed())
	_, r = w.preflight(nil)
	w.g.Expect(w.check(r, preflight.CheckOtherKarpenter).Result).To(Equal(preflight.Warn))
}

// Another Karpenter seen only by its leader lease (run out of cluster, or under another name)
// fails the check; a stale lease does not.
func TestOtherKarpenterByLease(t *testing.T) {
	w := newWorld(t)
	w.namespace("elsewhere")
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: preflight.LeaderLease, Namespace: "elsewhere"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("karpenter-7d9f_0a1b"), RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	w.create(lease, "karpenter")
	_, r := w.preflight(nil)
	c := w.check(r, preflight.CheckOtherKarpenter)
	w.g.Expect(c.Result).To(Equal(preflight.Fail))
	w.g.Expect(c.Found).To(ContainSubstring("leader lease elsewhere/karpenter-leader-election held by karpenter-7d9f_0a1b"))

	lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now().Add(-time.Hour)}
	w.g.Expect(kube.Update(w.ctx, lease)).To(Succeed())
	_, r = w.preflight(nil)
	w.g.Expect(w.check(r, preflight.CheckOtherKarpenter).Result).To(Equal(preflight.Pass))
}

// The running controller's checks: only those that change at run time, read within the
// bundle's RBAC (no leases, pods or Secrets), published on the gauge, one series per result.
func TestRuntimeRunner(t *testing.T) {
	w := newWorld(t)
	w.workerOnly()
	w.upstreamInstall("upstream-rt", 1)
	runner := preflight.NewRunner(cluster, time.Hour, testLogger(t))
	r := runner.RunOnce(w.ctx)
	var names []string
	for _, c := range r {
		names = append(names, c.Name)
	}
	w.g.Expect(names).To(Equal(preflight.RuntimeChecks))
	w.g.Expect(gauge(preflight.CheckGauge().WithLabelValues(preflight.CheckOtherKarpenter, "fail"))).To(Equal(1.0))
	w.g.Expect(gauge(preflight.CheckGauge().WithLabelValues(preflight.CheckOtherKarpenter, "pass"))).To(Equal(0.0))
	w.g.Expect(gauge(preflight.CheckGauge().WithLabelValues(preflight.CheckNodeGroupAPI, "pass"))).To(Equal(1.0))

	// The upstream provider goes: the next run turns the series over.
	w.g.Expect(kube.Delete(w.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "upstream-rt", Name: "karpenter"}})).To(Succeed())
	w.g.Eventually(func(g Gomega) {
		runner.RunOnce(context.Background())
		g.Expect(gauge(preflight.CheckGauge().WithLabelValues(preflight.CheckOtherKarpenter, "pass"))).To(Equal(1.0))
		g.Expect(gauge(preflight.CheckGauge().WithLabelValues(preflight.CheckOtherKarpenter, "fail"))).To(Equal(0.0))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// The versions the project says it tests are the simulated CKE's: its pinned apiserver and
// its kubelets. A pin bump that leaves the list fails here.
func TestTestedKubernetesIsTheSimulators(t *testing.T) {
	g := NewWithT(t)
	v, err := cluster.Discovery.ServerVersion()
	g.Expect(err).NotTo(HaveOccurred())
	for _, reported := range []string{v.GitVersion, cke.KubeletVersion} {
		ok, err := version.KubernetesTested(reported)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue(), "%s is not in version.TestedKubernetes %v", reported, version.TestedKubernetes)
	}
}

// DefaultPlacement is the rendered bundle's, so that the preflight evaluates what installs.
func TestDefaultPlacementIsTheBundles(t *testing.T) {
	g := NewWithT(t)
	p, err := preflight.PlacementFromFile(filepath.Join(root, "out", "karpenter.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	d := preflight.DefaultPlacement()
	g.Expect(p.Replicas).To(Equal(d.Replicas))
	g.Expect(p.Spec.NodeSelector).To(BeEmpty())
	g.Expect(p.Spec.Affinity).To(Equal(d.Spec.Affinity))
	g.Expect(p.Spec.Tolerations).To(Equal(d.Spec.Tolerations))
	g.Expect(p.Spec.Containers[0].Resources.Requests).To(Equal(d.Spec.Containers[0].Resources.Requests))
}

// renderedDeployment decodes the Deployment of a rendered stream.
func renderedDeployment(w *world, stream string) *appsv1.Deployment {
	w.t.Helper()
	for _, doc := range splitDocs(stream) {
		var probe struct{ Kind string }
		if yaml.Unmarshal([]byte(doc), &probe) != nil || probe.Kind != "Deployment" {
			continue
		}
		js, err := yaml.YAMLToJSON([]byte(doc))
		w.g.Expect(err).NotTo(HaveOccurred())
		d := &appsv1.Deployment{}
		w.g.Expect(json.Unmarshal(js, d)).To(Succeed())
		return d
	}
	w.t.Fatalf("no Deployment in the rendered stream")
	return nil
}

// The commands as the binary runs them: flags, the kubeconfig, one line per check and the exit
// code; values to standard output or a file.
func TestCommands(t *testing.T) {
	w := newWorld(t)
	w.workerOnly()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: env.Config.CertData, ClientKeyData: env.Config.KeyData, Token: env.Config.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	w.g.Expect(clientcmd.WriteToFile(*kc, path)).To(Succeed())

	// The command line as the binary reads it.
	run := func(args ...string) (code int, stdout, stderr string) {
		var out, errOut bytes.Buffer
		code, _, start := cli.Run(w.ctx, args, &out, &errOut)
		w.g.Expect(start).To(BeFalse(), "%q starts the controller", args)
		return code, out.String(), errOut.String()
	}
	code, out, errOut := run("preflight", "--kubeconfig", path)
	w.g.Expect(errOut).To(BeEmpty())
	w.g.Expect(code).To(Equal(preflight.ExitOK), out)
	w.g.Expect(out).To(ContainSubstring("PASS placement"))
	w.g.Expect(strings.Count(out, "\n")).To(Equal(len(preflight.RuntimeChecks)+2), "one line per check and the summary:\n%s", out)

	// The placement the bundle rendered before this release: the control-plane selector.
	old := filepath.Join(t.TempDir(), "old.yaml")
	w.g.Expect(os.WriteFile(old, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: karpenter}\nspec:\n  replicas: 2\n  selector: {}\n  template:\n    spec:\n      nodeSelector: {clever-cloud.com/cluster-node-role: control-plane}\n      containers: [{name: controller}]\n"), 0o644)).To(Succeed())
	code, out, _ = run("preflight", "--bundle", old, "--kubeconfig", path)
	w.g.Expect(code).To(Equal(preflight.ExitFail))
	w.g.Expect(out).To(ContainSubstring("FAIL placement"))

	code, out, _ = run("values", "--kubeconfig", path, "--output", "-")
	w.g.Expect(code).To(Equal(preflight.ExitOK))
	w.g.Expect(out).To(ContainSubstring("Worker-only cluster"))
	w.g.Expect(out).To(ContainSubstring("-t image=REGISTRY/NAME@sha256:DIGEST"), "without --image, the render gives the image")

	// A file: written once, then refused without --force and left as it was, replaced with it.
	file := filepath.Join(t.TempDir(), "v.yaml")
	code, _, errOut = run("values", "--kubeconfig", path, "--output", file)
	w.g.Expect(code).To(Equal(preflight.ExitOK), errOut)
	w.g.Expect(errOut).To(ContainSubstring("cue export ./cue -l values: " + file + " -t image="))
	first, err := os.ReadFile(file)
	w.g.Expect(err).NotTo(HaveOccurred())
	const image = "registry.example.com/karpenter/controller@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	code, _, errOut = run("values", "--kubeconfig", path, "--output", file, "--image", image)
	w.g.Expect(code).To(Equal(preflight.ExitFail))
	w.g.Expect(errOut).To(ContainSubstring(file + " exists: pass --force"))
	w.g.Expect(os.ReadFile(file)).To(Equal(first))
	code, _, errOut = run("values", "--kubeconfig", path, "--output", file, "--image", image, "--force")
	w.g.Expect(code).To(Equal(preflight.ExitOK), errOut)
	w.g.Expect(errOut).To(ContainSubstring("cue export ./cue -l values: "+file+" -e stream"), "the file carries the image")

	// The image written renders into the controller's Deployment with no -t image=.
	rendered := w.render(file)
	d := renderedDeployment(w, rendered)
	w.g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(image))

	code, _, errOut = run("preflight", "--no-such-flag")
	w.g.Expect(code).To(Equal(preflight.ExitFail))
	w.g.Expect(errOut).To(ContainSubstring("--no-such-flag"))
}
