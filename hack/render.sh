#!/usr/bin/env bash
# make render, make bundle and make dev: the install YAML (CRDs, then the controller) rendered
# with the user's values through the same `cue export` as out/ and a release, so every route a
# user takes to a cluster reads the values file the same way.
# Environment: IMAGE (a registry reference, by digest or tag; required unless DEV=1), VALUES (a
# values file; optional), OUT (one file, default install.yaml) or OUT_DIR (a directory that gets
# crds.yaml, karpenter.yaml and install.yaml), VERSION (the runbook links' release, when a
# vX.Y.Z), DEV=1 (keep the bundle's ko:// reference for `ko apply`), CUE (the cue binary).
set -euo pipefail
cd "$(dirname "$0")/.."
export CUE_REGISTRY=none

die() {
	echo "render: $*" >&2
	exit 1
}

image=${IMAGE:-}
if [[ ${DEV:-} == 1 ]]; then
	# ko resolves the bundle's own ko:// reference; any other image would bypass the build.
	[[ -z $image ]] || die "IMAGE=$image: the dev loop builds the image itself (ko); give IMAGE to make bundle instead"
else
	[[ -n $image ]] || die "IMAGE is empty: give the controller image the cluster pulls, e.g. IMAGE=registry.example.com/karpenter/controller@sha256:… (make image prints it)"
	[[ $image != ko://* ]] || die "IMAGE=$image is a ko import path, which only ko resolves: a cluster cannot pull it (use make dev or ko apply -f out/, or the image make image pushed)"
	[[ $image != *[[:space:]]* ]] || die "IMAGE='$image' contains whitespace"
	# A registry host is the first path element when it has a dot or a port, or is localhost:
	# without one, the runtime would look on Docker Hub for an image no one published there.
	host=${image%%/*}
	if [[ $image != */* ]] || [[ $host != *.* && $host != *:* && $host != localhost ]]; then
		die "IMAGE=$image names no registry host: write it in full, e.g. registry.example.com/${image}"
	fi
	last=${image##*/}
	[[ $image == *@sha256:* || $last == *:* ]] ||
		die "IMAGE=$image has neither a digest nor a tag: pin it (…@sha256:… from make image)"
fi

args=(export ./cue)
[[ -z $image ]] || args+=(-t image="$image")
if [[ -n ${VALUES:-} ]]; then
	[[ -f $VALUES ]] || die "VALUES=$VALUES: no such file"
	args+=(-l values: "$VALUES")
fi
if [[ ${VERSION:-} =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
	args+=(-t version="$VERSION")
fi

# Each file is rendered beside its destination and moved in only once every file rendered, so
# a refused value leaves what was there before, never a half bundle. Plain arrays, no
# associative ones or empty "${a[@]}" under set -u: this runs on macOS's bash 3.2 too.
if [[ -n ${OUT_DIR:-} ]]; then
	mkdir -p "$OUT_DIR"
	exprs=(crdStream appStream stream)
	outs=("$OUT_DIR/crds.yaml" "$OUT_DIR/karpenter.yaml" "$OUT_DIR/install.yaml")
else
	exprs=(stream)
	outs=("${OUT:-install.yaml}")
fi
tmps=()
cleanup() {
	if [[ ${#tmps[@]} -gt 0 ]]; then rm -f "${tmps[@]}"; fi
}
trap cleanup EXIT
for i in "${!exprs[@]}"; do
	tmps+=("$(mktemp "${outs[$i]}.tmp.XXXXXX")")
	"${CUE:-cue}" "${args[@]}" -e "${exprs[$i]}" --out text >"${tmps[$i]}"
done
for i in "${!exprs[@]}"; do
	mv "${tmps[$i]}" "${outs[$i]}"
done
tmps=()
what=${image:-the ko:// reference}
echo "render: ${OUT_DIR:-${OUT:-install.yaml}} for $what${VALUES:+ with $VALUES}" >&2
