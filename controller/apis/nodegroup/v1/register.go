package v1

import "k8s.io/client-go/kubernetes/scheme"

func init() {
	// Karpenter's operator builds its clients on client-go's global scheme; register there.
	if err := AddToScheme(scheme.Scheme); err != nil {
		panic(err)
	}
}
