package capacity_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/testenv"
)

func TestCapacityIsLearnedFromKarpenterNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	node := env.NewNode(g, testenv.Name("learn"), testenv.Name("group"), "L", map[string]string{karpv1.NodePoolLabelKey: "pool"})
	node.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("12"), corev1.ResourceMemory: resource.MustParse("23000000Ki")}
	g.Expect(env.Client.Status().Update(ctx, node)).To(Succeed())
	g.Eventually(func() int64 {
		it, _ := flavors.Get("L")
		return it.Capacity.Memory().Value()
	}).WithTimeout(testenv.Wait).Should(Equal(int64(23000000 * 1024)))
}
