// Package version carries the release version, stamped at build time with
// -ldflags "-X github.com/CleverCloud/karpenter-provider-clever-cloud/controller/version.Version=vX.Y.Z".
package version

// Version is the release this binary was built from; "dev" when unstamped.
var Version = "dev"

// UserAgent is the User-Agent of the controller's outbound HTTP calls.
func UserAgent() string { return "karpenter-provider-clever-cloud/" + Version }
