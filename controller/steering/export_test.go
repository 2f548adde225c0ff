package steering

// Plan exposes the packing model to the package's external tests.
var Plan = plan
