// Package v1alpha1 holds CleverNodeClass, the provider-specific NodeClass that Karpenter
// NodePools reference to describe how CKE nodes are built.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.clever-cloud.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
)

var (
	// GroupVersion is the API group and version of CleverNodeClass.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}
	// SchemeBuilder registers CleverNodeClass with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &CleverNodeClass{}, &CleverNodeClassList{})
		metav1AddToGroupVersion(s)
		return nil
	})
	// AddToScheme adds CleverNodeClass to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	// Karpenter's operator builds its clients on client-go's global scheme, where core
	// registers its own kinds; ours must be there too.
	if err := AddToScheme(scheme.Scheme); err != nil {
		panic(err)
	}
}
