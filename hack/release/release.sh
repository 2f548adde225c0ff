#!/usr/bin/env bash
# Publishes the controller image with ko and, for a release, the manifests that name it by
# digest. The Makefile's base, image and release targets call it; docs/release.md explains.
#
#   release.sh base     push the minimal base to BASE_REPO, print its digest reference
#   release.sh image    build and push the image to KO_DOCKER_REPO, print its digest reference
#   release.sh release  the image, then DIST/{crds,karpenter,install}.yaml and DIST/SHA256SUMS,
#                       and CHANGELOG.md's Unreleased notes filed under VERSION
#
# Environment: KO_DOCKER_REPO (required), VERSION (required for release: vX.Y.Z),
# BASE_REPO (default KO_DOCKER_REPO/base), KO_DEFAULTBASEIMAGE (skips building the base),
# DIST (default dist), KO and CUE (default bin/ko, bin/cue), CHANGELOG (default CHANGELOG.md).
set -euo pipefail
# inherit_errexit (below) is bash 4.4's; an older bash, as macOS's /bin/bash 3.2, would stop on
# the shopt with a message that names neither the cause nor the fix.
if ((BASH_VERSINFO[0] < 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] < 4))); then
	echo "release: needs bash 4.4 or later, this is $BASH_VERSION (on macOS: brew install bash, then run make again)" >&2
	exit 1
fi
# A failure inside $(…) must stop the release too, not yield an empty value.
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."

export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
export CUE_REGISTRY=none
# ko would otherwise stamp the image with this time, and the digest would follow the clock.
unset SOURCE_DATE_EPOCH KO_DATA_DATE_EPOCH

die() { echo "release: $*" >&2; exit 1; }

[[ -n ${KO_DOCKER_REPO:-} ]] || die "set KO_DOCKER_REPO to the repository the image goes to (REGISTRY/NAME)"
BASE_REPO=${BASE_REPO:-$KO_DOCKER_REPO/base}
DIST=${DIST:-dist}
KO=${KO:-bin/ko}
CUE=${CUE:-bin/cue}
CHANGELOG=${CHANGELOG:-CHANGELOG.md}

# base prints the base's digest reference after pushing it if the registry lacks it. The
# reference, registry host included, ends up in the image's annotations: releases are
# reproducible for a given BASE_REPO.
base() {
	go run ./hack/release/base -repo "$BASE_REPO"
}

# image builds both platforms and prints REPO:TAG@sha256:… as ko does for a tagged build.
image() {
	: "${VERSION:?set VERSION}"
	if [[ -z ${KO_DEFAULTBASEIMAGE:-} ]]; then
		KO_DEFAULTBASEIMAGE=$(base)
		export KO_DEFAULTBASEIMAGE
	fi
	echo "release: building $KO_DOCKER_REPO:$VERSION on $KO_DEFAULTBASEIMAGE" >&2
	# --bare: the image is KO_DOCKER_REPO itself, not a name ko derives from the import path.
	# ko.yaml gives the platforms and flags, and reads VERSION for the ldflags.
	VERSION=$VERSION "$KO" build --bare --tags="$VERSION" --sbom=spdx ./controller
}

# changelog files the notes under "## [Unreleased]" (Keep a Changelog) under a heading for
# VERSION and today's date, leaving an empty Unreleased section above it. Releasing the same
# VERSION again changes nothing. It runs after dist/ is in place: a failed release leaves the
# notes unreleased. The commit that records it is the release manager's.
changelog() {
	if grep -qF "## [$VERSION]" "$CHANGELOG"; then
		return 0
	fi
	local tmp
	tmp=$(mktemp "$CHANGELOG.XXXXXX")
	awk -v heading="## [$VERSION] - $(date -u +%F)" '
		{ print }
		!done && $0 == "## [Unreleased]" { print ""; print heading; done = 1 }
	' "$CHANGELOG" >"$tmp"
	cat "$tmp" >"$CHANGELOG" # keeps the file's mode, which mktemp's file lacks
	rm -f "$tmp"
	echo "release: $CHANGELOG: the Unreleased notes are now $VERSION's" >&2
}

# sums writes what `sha256sum` writes; macOS has only `shasum`, whose -a 256 output is the same.
sums() {
	if command -v sha256sum >/dev/null; then
		sha256sum "$@"
	else
		shasum -a 256 "$@"
	fi
}

release() {
	command -v sha256sum >/dev/null || command -v shasum >/dev/null ||
		die "neither sha256sum (GNU coreutils) nor shasum is on PATH, to write SHA256SUMS"
	[[ ${VERSION:-} =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
		die "VERSION must be a release version vX.Y.Z[-pre], got '${VERSION:-}'"
	# Checked before anything is pushed, so the notes cannot be what fails a release.
	grep -qxF "## [Unreleased]" "$CHANGELOG" ||
		die "$CHANGELOG has no '## [Unreleased]' line to file the release notes from"
	local ref digest pinned stage
	ref=$(image)
	digest=${ref##*@}
	[[ $digest == sha256:* ]] || die "ko printed no digest reference: '$ref'"
	pinned=$KO_DOCKER_REPO@$digest

	# Render into a sibling directory and swap it in, so a failed release leaves no half dist.
	mkdir -p "$(dirname "$DIST")"
	stage=$(mktemp -d "$DIST.tmp.XXXXXX")
	trap 'rm -rf "$stage"' EXIT
	# The same CUE export that renders out/, with the digest for the ko:// path: one rendering
	# path for the dev loop's manifests and the release's.
	"$CUE" export ./cue -t image="$pinned" -t version="$VERSION" -e crdStream --out text >"$stage/crds.yaml"
	"$CUE" export ./cue -t image="$pinned" -t version="$VERSION" -e appStream --out text >"$stage/karpenter.yaml"
	"$CUE" export ./cue -t image="$pinned" -t version="$VERSION" -e stream --out text >"$stage/install.yaml"
	(cd "$stage" && sums crds.yaml install.yaml karpenter.yaml >SHA256SUMS)
	chmod 0755 "$stage"
	rm -rf "$DIST"
	mv "$stage" "$DIST"
	trap - EXIT
	changelog
	echo "release: $VERSION is $pinned; manifests in $DIST" >&2
	echo "$pinned"
}

case ${1:-} in
base | image | release) "$1" ;;
*) die "usage: $0 base|image|release" ;;
esac
