package cloudprovider

// The provider's metrics, for the tests to read.
var (
	Launches        = launches
	QuotaRejections = quotaRejections
)
