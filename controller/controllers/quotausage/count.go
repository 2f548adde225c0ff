package quotausage

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// Count is the controller's count of what the organisation quota charges in the cluster, for
// readers outside it (the preflight), so that they never count differently.
func Count(ctx context.Context, kube client.Client, cat *catalog.Catalog) (quota.Observation, error) {
	return count(ctx, kube, cat)
}
