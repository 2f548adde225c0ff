package garbagecollection

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/metrics"
)

var (
	// garbageCollected counts orphaned groups the garbage collector deleted.
	garbageCollected = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "garbage_collected_total",
		Help: "Orphaned NodeGroups (owner NodeClaim confirmed gone) that garbage collection deleted.",
	})
	// garbageRefused counts groups that look managed but lack ownership proof, by
	// nodegroup.Reason*.
	garbageRefused = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "garbage_collection_refused",
		Help: "NodeGroups that carry the provider's labels but are not proven launched for a NodeClaim, which garbage collection refuses to delete, by reason (NoOwnerClaim: no NodeClaim UID; NotNamedForItsClaim: not named after the NodeClaim it names, as a renamed copy is).",
	}, []string{"reason"})
	// outOfBand counts managed groups whose nodeCount was changed out of band.
	outOfBand = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Subsystem: metrics.NodeGroupSubsystem, Name: "resized_out_of_band",
		Help: "Managed NodeGroups whose spec.nodeCount is not 1 (changed by hand or by another autoscaler).",
	})
)

func init() {
	metrics.MustRegister(garbageCollected, garbageRefused, outOfBand)
}
