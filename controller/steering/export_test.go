package steering

// The packing model and its parts, for the package's external tests.
var (
	Plan            = plan
	CoreOrder       = coreOrder
	CheapestHolding = cheapestHolding
)
