package preflight

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// CheckImage refuses an image reference a cluster cannot pull, by the rules `make render`
// applies to IMAGE (hack/render.sh): values --image writes the reference the render would
// otherwise have been given, so it must pass the same gate.
func CheckImage(ref string) error {
	if ref == "" {
		return errors.New("empty: give the controller image the cluster pulls, e.g. registry.example.com/karpenter/controller@sha256:…")
	}
	if strings.HasPrefix(ref, "ko://") {
		return fmt.Errorf("%s is a ko import path, which only ko resolves: a cluster cannot pull it (give the image make image pushed)", ref)
	}
	if strings.IndexFunc(ref, unicode.IsSpace) >= 0 {
		return fmt.Errorf("%q contains whitespace", ref)
	}
	// Without a registry host the runtime would look on Docker Hub, where no one published it.
	host, _, hasPath := strings.Cut(ref, "/")
	if !hasPath || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return fmt.Errorf("%s names no registry host: write it in full, e.g. registry.example.com/%s", ref, ref)
	}
	last := ref[strings.LastIndex(ref, "/")+1:]
	if !strings.Contains(ref, "@sha256:") && !strings.Contains(last, ":") {
		return fmt.Errorf("%s has neither a digest nor a tag: pin it (…@sha256:… from make release or make image)", ref)
	}
	return nil
}
