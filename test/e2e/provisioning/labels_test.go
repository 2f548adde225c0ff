package provisioning

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/test/harness"
)

func nodeSelector(key, value string) harness.WorkloadOption {
	return func(d *appsv1.Deployment) {
		if d.Spec.Template.Spec.NodeSelector == nil {
			d.Spec.Template.Spec.NodeSelector = map[string]string{}
		}
		d.Spec.Template.Spec.NodeSelector[key] = value
	}
}

// CKE does not stamp topology labels on its nodes: zone and region
// reach the node through the NodeClaim at registration. A pod that selects the region gets
// exactly one node (before, one such pod made Karpenter launch three VMs and never ran).
func TestRegionSelectorGetsExactlyOneNode(t *testing.T) {
	s := harness.NewScenario(t, env)
	class := s.NodeClass("", nil)
	pool := s.NodePool("", class, nil, time.Minute)
	created := s.RecordGroups(pool.Name, nil)
	d := s.Deployment("in-par", pool.Name, 1, "1", "1Gi", nodeSelector(corev1.LabelTopologyRegion, "par"))

	pods := s.WaitRunning(d, 1, harness.LaunchTimeout)
	node := &corev1.Node{}
	Expect(env.Client.Get(s.Ctx, client.ObjectKey{Name: pods[0].Spec.NodeName}, node)).To(Succeed())
	Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelTopologyRegion, "par"))
	Expect(node.Labels).To(HaveKeyWithValue(corev1.LabelTopologyZone, "par"))
	Expect(created.Created()).To(Equal(1), "NodeGroups created for one pod")
	// The group itself asks the platform for no topology label nor any key Karpenter owns.
	g := s.PoolGroups(pool.Name)[0]
	for k := range g.Spec.Labels {
		Expect(k).NotTo(HavePrefix("karpenter.sh/"))
		Expect(k).NotTo(HavePrefix("topology.kubernetes.io/"))
	}
}

// A CleverNodeClass may not set a label Karpenter, the provider or the platform owns: the
// bundle's CRD refuses it, naming the label.
func TestCleverNodeClassRefusesOwnedLabels(t *testing.T) {
	s := harness.NewScenario(t, env)
	for _, key := range []string{corev1.LabelTopologyZone, karpv1.NodePoolLabelKey, "clever-cloud.com/flavor", v1alpha1.LabelNodeClaim} {
		nc := &v1alpha1.CleverNodeClass{
			ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-owned"},
			Spec:       v1alpha1.CleverNodeClassSpec{Labels: map[string]v1alpha1.LabelValue{key: "elsewhere"}},
		}
		err := env.Client.Create(s.Ctx, nc)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "label %s: %v", key, err)
		Expect(err.Error()).To(ContainSubstring(key))
	}
}
