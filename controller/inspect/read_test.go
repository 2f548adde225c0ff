package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	cp "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/quotastate"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// installed is what the bundle installs in the karpenter namespace: the Deployment mounting
// the flavors overrides ConfigMap, its leader's pod and lease, and the quota state.
func installed(flavorsYAML string) []client.Object {
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "karpenter", Name: "karpenter", Labels: map[string]string{partOfLabel: partOfOurs}}}
	deploy.Spec.Template.Spec.Containers = []corev1.Container{{
		Name: "controller", Image: "registry.example.com/karpenter@sha256:abc",
		Env:          []corev1.EnvVar{{Name: "CLEVER_CLOUD_REGION", Value: "par"}, {Name: "FLAVORS_CONFIG_PATH", Value: "/etc/karpenter/flavors/flavors.yaml"}},
		VolumeMounts: []corev1.VolumeMount{{Name: "flavors", MountPath: "/etc/karpenter/flavors"}},
	}}
	deploy.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "flavors", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "karpenter-flavors"}}}}}
	leader := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "karpenter", Name: "karpenter-7d9f-abcde"}, Spec: corev1.PodSpec{NodeName: "cp-0", Containers: deploy.Spec.Template.Spec.Containers}}
	leader.Status.ContainerStatuses = []corev1.ContainerStatus{{Image: "registry.example.com/karpenter:v1.2.3", ImageID: "registry.example.com/karpenter@sha256:abc"}}
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "karpenter", Name: LeaseName}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("karpenter-7d9f-abcde_0f1e")}}
	snap, _ := json.Marshal(quota.Snapshot{Limit: quota.Limit{CPU: 40, GB: 40}, Sure: quota.Usage{CPU: 40, GB: 40}})
	state := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "karpenter", Name: quotastate.ConfigMapName}, Data: map[string]string{quotastate.KeySnapshot: string(snap), quotastate.KeySummary: "in use: 16 vCPU / 24 GB\n"}}
	flavors := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "karpenter", Name: "karpenter-flavors"}, Data: map[string]string{"flavors.yaml": flavorsYAML}}
	cpNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Labels: map[string]string{ngv1.LabelClusterNodeRole: ngv1.NodeRoleControlPlane, ngv1.LabelFlavor: "S"}}}
	cpNode.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("11385832Ki")}
	refused := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "refused.1"}, Reason: cp.ReasonRefused,
		InvolvedObject: corev1.ObjectReference{Kind: "NodeClaim", Name: "general-abcde"},
		Message:        "The node-group operator refused NodeGroup general-abcde (flavor XS) for a reason the provider does not know (Nope): no; deleting it, and offering the flavor as unavailable for 6m0s",
		LastTimestamp:  metav1.NewTime(time.Now()),
	}
	return []client.Object{deploy, leader, lease, state, flavors, cpNode, refused}
}

func fakeClient(objs ...client.Object) client.Client {
	return fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).
		WithIndex(&corev1.Event{}, "reason", func(o client.Object) []string { return []string{o.(*corev1.Event).Reason} }).
		Build()
}

func TestReadFindsTheLeaderItsImageTheOverridesAndTheQuotaState(t *testing.T) {
	g := NewWithT(t)
	metrics := func(_ context.Context, p *corev1.Pod) (*Metrics, error) {
		g.Expect(p.Name).To(Equal("karpenter-7d9f-abcde"), "the leader's metrics, not a standby's")
		return ParseMetrics([]byte("karpenter_clevercloud_catalog_overrides_valid 1\nkarpenter_clevercloud_preflight_check{check=\"nodegroup-api\",result=\"pass\"} 1\n"))
	}
	s := read(context.Background(), fakeClient(installed("- name: XS\n  priceHourly: 0.05\n")...), metrics, "karpenter")
	g.Expect(s.Errors).To(BeEmpty())
	st := BuildStatus(s)
	g.Expect(st.Leader).To(HavePrefix("karpenter-7d9f-abcde_0f1e"))
	g.Expect(st.Leader).To(HaveSuffix("; pod karpenter-7d9f-abcde on node cp-0, image registry.example.com/karpenter:v1.2.3 (registry.example.com/karpenter@sha256:abc)"))
	g.Expect(st.Overrides).To(Equal("in force: ConfigMap karpenter/karpenter-flavors key flavors.yaml pins XS"))
	g.Expect(st.Preflight).To(Equal("nodegroup-api: pass"))
	g.Expect(st.Quota).To(Equal("in use: 16 vCPU / 24 GB\ncounted now: 8 vCPU / 12 GB in use"))
	price, _ := s.price("XS")
	g.Expect(price).To(Equal(0.05), "the pinned price")
	g.Expect(unavailableFlavors(s)).To(HaveKey("XS"))
}

func TestReadSaysTheControllerRefusesABadOverridesFile(t *testing.T) {
	g := NewWithT(t)
	s := read(context.Background(), fakeClient(installed("- name: NEW\n  cpu: 2\n")...), nil, "karpenter")
	g.Expect(BuildStatus(s).Overrides).To(Equal("refused, the controller serves the embedded catalogue: applying flavor overrides: NEW: a flavor absent from the base catalogue must give cpu, memoryKi and priceHourly"))
	g.Expect(s.Catalog.Flavor("NEW")).Error().To(BeFalse())
	g.Expect(BuildStatus(s).Preflight).To(HavePrefix("not readable through the apiserver (the leader is not a pod of karpenter)"), "no metrics reader")
}

func TestReadNamesWhatItCouldNotRead(t *testing.T) {
	g := NewWithT(t)
	failing := func(context.Context, *corev1.Pod) (*Metrics, error) {
		return nil, errors.New("pods \"karpenter-7d9f-abcde\" is forbidden: cannot get resource \"pods/proxy\"")
	}
	objs := installed("")
	s := read(context.Background(), fakeClient(objs[0], objs[1], objs[2]), failing, "karpenter")
	st := BuildStatus(s)
	g.Expect(st.Preflight).To(Equal(`not readable through the apiserver (pods "karpenter-7d9f-abcde" is forbidden: cannot get resource "pods/proxy"); on the leader: kubectl -n karpenter port-forward pod/karpenter-7d9f-abcde 8080, then curl -s localhost:8080/metrics | grep karpenter_clevercloud_preflight_check`))
	g.Expect(st.Unreadable).To(HaveKey("the leader's metrics"))
	g.Expect(st.Quota).To(HavePrefix("no state saved yet"))
	g.Expect(st.Overrides).To(HavePrefix("refused, the controller serves the embedded catalogue: reading ConfigMap karpenter/karpenter-flavors key flavors.yaml"))
}
