package main

import (
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	_ "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/karpenter/pkg/operator"
	_ "github.com/invopop/jsonschema"
	_ "cuelang.org/go/cue"
)

func main() {}
