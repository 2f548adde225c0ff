#!/usr/bin/env bash
# Regenerates everything the deployment bundle derives: the JSON Schemas (from Go types), the
# controller's embedded base catalogue (from flavors/), the CRDs the bundle embeds (ours from
# controller-gen's output, Karpenter's from the pinned module) and the rendered manifests in
# out/. Run from anywhere; `make generate` calls it after controller-gen.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOTOOLCHAIN="${GOTOOLCHAIN:-go1.27.3}"
export CUE_REGISTRY=none
# A prebuilt bin/cue saves a second per call; it is rebuilt when tools/go.mod moves.
CUE=bin/cue
if [[ ! -x $CUE || tools/go.mod -nt $CUE ]]; then
	go build -modfile=tools/go.mod -o "$CUE" cuelang.org/go/cmd/cue
fi

# 1. Schemas from the Go types.
go run ./schema/gen

# 2. The base catalogue the controller embeds.
"$CUE" export ./flavors --out json >controller/catalog/base.json.tmp
mv controller/catalog/base.json.tmp controller/catalog/base.json

# 3. CRDs, copied verbatim so the bundle can embed them (CUE cannot embed outside its tree).
karpenter=$(go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
rm -rf cue/crds && mkdir -p cue/crds
cp controller/apis/crds/*.yaml cue/crds/
# All of core's CRDs: NodePool, NodeClaim, NodeOverlay, and CapacityBuffer for its gate.
cp "$karpenter"/pkg/apis/crds/*.yaml cue/crds/
chmod 0644 cue/crds/*.yaml

# 4. Format and vet every CUE package, then render out/.
"$CUE" fmt --check ./flavors ./schema ./cue
"$CUE" vet -c ./flavors ./cue
rm -f out/*.yaml && mkdir -p out
"$CUE" export ./cue -e crdStream --out text >out/crds.yaml
"$CUE" export ./cue -e appStream --out text >out/karpenter.yaml
