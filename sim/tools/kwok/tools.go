//go:build tools

// Package kwok only exists so that `go mod tidy` keeps the kwok command pinned.
package kwok

import _ "sigs.k8s.io/kwok/cmd/kwok"
