#!/usr/bin/env bash
# make render: the install YAML (CRDs, then the controller) for an image a cluster can pull,
# rendered with the user's values through the same `cue export` as out/ and a release.
# Environment: IMAGE (required: a registry reference, by digest or tag), VALUES (a values file;
# optional), OUT (default install.yaml), VERSION (the runbook links' release, when a vX.Y.Z),
# CUE (the cue binary).
set -euo pipefail
cd "$(dirname "$0")/.."
export CUE_REGISTRY=none

die() {
	echo "render: $*" >&2
	exit 1
}

image=${IMAGE:-}
[[ -n $image ]] || die "IMAGE is empty: give the controller image the cluster pulls, e.g. IMAGE=registry.example.com/karpenter/controller@sha256:… (make release prints it)"
[[ $image != ko://* ]] || die "IMAGE=$image is a ko import path, which only ko resolves: a cluster cannot pull it (use ko apply -f out/, or the image make image pushed)"
[[ $image != *[[:space:]]* ]] || die "IMAGE='$image' contains whitespace"
# A registry host is the first path element when it has a dot or a port, or is localhost:
# without one, the runtime would look on Docker Hub for an image no one published there.
host=${image%%/*}
if [[ $image != */* ]] || [[ $host != *.* && $host != *:* && $host != localhost ]]; then
	die "IMAGE=$image names no registry host: write it in full, e.g. registry.example.com/${image}"
fi
last=${image##*/}
[[ $image == *@sha256:* || $last == *:* ]] ||
	die "IMAGE=$image has neither a digest nor a tag: pin it (…@sha256:… from make release or make image)"

args=(export ./cue -t image="$image" -e stream --out text)
if [[ -n ${VALUES:-} ]]; then
	[[ -f $VALUES ]] || die "VALUES=$VALUES: no such file"
	args+=(-l values: "$VALUES")
fi
if [[ ${VERSION:-} =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	args+=(-t version="$VERSION")
fi
out=${OUT:-install.yaml}
tmp=$(mktemp "$out.tmp.XXXXXX")
trap 'rm -f "$tmp"' EXIT
"${CUE:-cue}" "${args[@]}" >"$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "render: $out for $image${VALUES:+ with $VALUES}" >&2
