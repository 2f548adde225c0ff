//go:build tools

// Package etcd only exists so that `go mod tidy` keeps the etcd server pinned.
package etcd

import _ "go.etcd.io/etcd/server/v3"
