// Package crds embeds the CustomResourceDefinitions generated from the provider's API types,
// for tests and tools that install them.
package crds

import (
	_ "embed"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed karpenter.clever-cloud.com_clevernodeclasses.yaml
var cleverNodeClassYAML []byte

// CleverNodeClass returns the CleverNodeClass CRD.
func CleverNodeClass() *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(cleverNodeClassYAML, crd); err != nil {
		panic(fmt.Sprintf("decoding embedded CleverNodeClass CRD: %v", err))
	}
	return crd
}
