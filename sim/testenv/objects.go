package testenv

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/nodegroup"
)

// Wait is how long a test waits for a controller to act on what it wrote.
const Wait = 15 * time.Second

var seq atomic.Int32

// Name returns a name no other test of the binary uses: tests share one apiserver and never
// clean up after themselves.
func Name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// NewClass creates a CleverNodeClass with these labels.
func (e *Env) NewClass(g gomega.Gomega, labels map[string]v1alpha1.LabelValue) *v1alpha1.CleverNodeClass {
	class := &v1alpha1.CleverNodeClass{ObjectMeta: metav1.ObjectMeta{Name: Name("class")}, Spec: v1alpha1.CleverNodeClassSpec{Labels: labels}}
	g.Expect(e.Client.Create(context.Background(), class)).To(gomega.Succeed())
	return class
}

// NewClaim creates a NodeClaim of NodePool "pool" built from the named CleverNodeClass.
func (e *Env) NewClaim(g gomega.Gomega, class string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: Name("claim"), Labels: map[string]string{karpv1.NodePoolLabelKey: "pool"}},
		Spec: karpv1.NodeClaimSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: v1alpha1.Group, Kind: v1alpha1.NodeClassKind, Name: class},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
		},
	}
	g.Expect(e.Client.Create(context.Background(), nc)).To(gomega.Succeed())
	return nc
}

// NewOwnedGroup creates a CleverNodeClass, a NodeClaim of it and the NodeGroup the provider
// builds for that claim, of this flavor.
func (e *Env) NewOwnedGroup(g gomega.Gomega, flavor string) (*karpv1.NodeClaim, *ngv1.NodeGroup) {
	class := e.NewClass(g, nil)
	claim := e.NewClaim(g, class.Name)
	group := nodegroup.Build(claim, class, flavor)
	g.Expect(e.Client.Create(context.Background(), group)).To(gomega.Succeed())
	return claim, group
}

// NewNode creates a worker node as CKE labels it when it joins a NodeGroup of that flavor,
// with extra labels on top.
func (e *Env) NewNode(g gomega.Gomega, name, group, flavor string, extra map[string]string) *corev1.Node {
	labels := map[string]string{ngv1.LabelNodeGroup: group, ngv1.LabelFlavor: flavor, ngv1.LabelClusterNodeRole: ngv1.NodeRoleWorker}
	maps.Copy(labels, extra)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	g.Expect(e.Client.Create(context.Background(), node)).To(gomega.Succeed())
	return node
}

// Drain takes what a channel holds now, without waiting.
func Drain[T any](ch <-chan T) []T {
	var out []T
	for {
		select {
		case v := <-ch:
			out = append(out, v)
		default:
			return out
		}
	}
}
