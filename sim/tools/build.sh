#!/usr/bin/env bash
# Builds the simulated CKE's pinned binaries (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, kubectl, kwok) from the Go modules under sim/tools into a cache
# folder, and prints that folder. The folder's name is a hash of the pins, so a build happens
# once per pin change and every later call is a no-op. The folder is in the user's cache
# (SIM_CACHE_DIR overrides it), like Go's build cache: every clone on a machine shares it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${SIM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-provider-clever-cloud}
kube_version=$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$here/kube/go.mod")
pins=$(cat "$here"/*/go.mod "$here"/*/go.sum "$here/build.sh" | sha256sum | cut -c1-16)
out="$cache/sim-bin/$pins"

if [[ -f "$out/.complete" ]]; then
	echo "$out"
	exit 0
fi
mkdir -p "$out"

minor=${kube_version#v1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"

build() { # module dir, output name, package, ldflags
	if [[ ! -x "$out/$2" ]]; then
		echo "building $2 ($3)" >&2
		(cd "$here/$1" && CGO_ENABLED=0 go build -trimpath -ldflags "$4" -o "$out/$2.tmp" "$3")
		mv "$out/$2.tmp" "$out/$2"
	fi
}

build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build kwok kwok sigs.k8s.io/kwok/cmd/kwok "-s -w"
build kube kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"
build kube kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
build kube kubectl k8s.io/kubernetes/cmd/kubectl "$ldflags"
touch "$out/.complete"
ln -sfn "$pins" "$cache/sim-bin/current"
echo "$out"
