package install

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim/stack"
)

// The shipped Deployment's pod passes the Pod Security "restricted" profile its namespace
// enforces (server-side dry run: admission runs, nothing is created).
func TestRestrictedPodSecurityAdmitsTheController(t *testing.T) {
	g := NewWithT(t)
	ns := &corev1.Namespace{}
	g.Expect(env.Client.Get(t.Context(), client.ObjectKey{Name: stack.SystemNamespace}, ns)).To(Succeed())
	g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))

	deploy := env.Bundle.Deployment
	g.Expect(deploy).NotTo(BeNil())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pod-security-", Namespace: stack.SystemNamespace, Labels: deploy.Spec.Template.Labels},
		Spec:       deploy.Spec.Template.Spec,
	}
	g.Expect(env.Client.Create(t.Context(), pod, client.DryRunAll)).To(Succeed())

	// And the check can fail: a container that keeps its capabilities is refused.
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].SecurityContext.Capabilities = nil
	err := env.Client.Create(t.Context(), bad, client.DryRunAll)
	g.Expect(err).To(MatchError(ContainSubstring("restricted")))
}
