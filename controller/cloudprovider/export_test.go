package cloudprovider

// The provider's metrics, for the tests to read.
var (
	Launches        = launches
	QuotaRejections = quotaRejections
)

// The provider's memory spans, for the tests to step their clocks by.
const (
	FlavorUnsupportedTTL = flavorUnsupportedTTL
	RefusedTTL           = refusedTTL
	SteeringTTL          = steeringTTL
)
