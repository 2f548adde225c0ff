package cloudprovider_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/cloudprovider"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/quota"
)

// GetInstanceTypes runs on every scheduling loop, once per NodePool.
func BenchmarkGetInstanceTypes(b *testing.B) {
	for _, bc := range []struct {
		name  string
		limit quota.Limit
	}{
		{"quota-unknown", quota.Limit{}},
		{"quota-limiting", quota.Limit{CPU: 40, GB: 40}}, // L and XL filtered: copies offerings
	} {
		b.Run(bc.name, func(b *testing.B) {
			cat, err := catalog.Load("", "par", logr.Discard())
			if err != nil {
				b.Fatal(err)
			}
			clk := clocktesting.NewFakeClock(time.Now())
			tracker := quota.NewTracker(clk, bc.limit)
			tracker.Observe(quota.Usage{CPU: 16, GB: 24}, nil)
			p := cloudprovider.New(nil, nil, cat, nil, tracker, events.NewRecorder(record.NewFakeRecorder(1)), clk, time.Minute)
			pool := &karpv1.NodePool{}
			pool.Name = "default"
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.GetInstanceTypes(ctx, pool); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
