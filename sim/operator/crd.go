package operator

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

//go:embed nodegroups.crd.yaml
var crdYAML []byte

// CRD returns the NodeGroup CustomResourceDefinition as CKE serves it.
func CRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
		return nil, fmt.Errorf("decoding embedded NodeGroup CRD: %w", err)
	}
	return crd, nil
}

// InstallCRD creates (or updates) the NodeGroup CRD and waits until it is served.
func InstallCRD(ctx context.Context, c client.Client) error {
	crd, err := CRD()
	if err != nil {
		return err
	}
	existing := &apiextensionsv1.CustomResourceDefinition{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(crd), existing); {
	case apierrors.IsNotFound(err):
		if err := c.Create(ctx, crd); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	case err != nil:
		return fmt.Errorf("reading CRD %s: %w", crd.Name, err)
	default:
		existing.Spec = crd.Spec
		if err := c.Update(ctx, existing); err != nil {
			return fmt.Errorf("updating CRD %s: %w", crd.Name, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(crd), got); err != nil {
			return false, nil //nolint:nilerr // transient until established
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
	}
	return nil
}
