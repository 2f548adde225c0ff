package stack

import "context"

// What the lifecycle suite (test/lifecycle) needs to install one release over another: a
// bundle and binary swapped under a running Env, as an upgrade swaps manifests and image
// (BuildController builds the controller of any commit of this repository).

// ApplyBundle applies b over whatever is installed, as `kubectl apply -f install.yaml` does for
// an install or an upgrade: its CRDs, then, once they are served, its controller objects (all
// but the workload's, as Start). Fields an earlier bundle applied and b no longer has are
// removed (same field manager). The next controller start takes b's Deployment environment.
func (e *Env) ApplyBundle(ctx context.Context, b *Bundle) error {
	e.Bundle = b
	return e.applyBundle(ctx)
}

// UseBinary makes every later controller start run binary: the image of another release.
func (e *Env) UseBinary(binary string) { e.binary = binary }
