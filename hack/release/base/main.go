// Command base builds the controller image's base: a two-platform OCI index whose only layer
// holds a CA bundle, a nonroot user and the directories a static Go binary expects. Every
// input is pinned (the CA bundle comes from a Go module, the rest is written below) and the
// layer is a sorted tar with zero timestamps and numeric owners, so the same commit always
// yields the same index digest. That lets ko.yaml pin the base by digest, and lets a machine
// without internet rebuild and host it.
//
//	go run ./hack/release/base                    # print the index digest, push nothing
//	go run ./hack/release/base -repo REG/NAME     # push (unless present), print REG/NAME@sha256:…
package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Platforms are the ones the controller ships for; ko builds exactly the platforms the base
// index offers that ko.yaml asks for, so both must be here.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// NonRoot is distroless's nonroot uid and gid, which Kubernetes policies commonly expect.
const NonRoot = 65532

// Tag names the base in its repository: registries that collect untagged manifests would
// otherwise delete it, but nothing resolves it by tag.
const Tag = "nonroot"

// caModule is where the CA bundle comes from; its version is written into the bundle so an
// image says which roots it trusts.
const caModule = "golang.org/x/crypto/x509roots/fallback"

func main() {
	repo := flag.String("repo", "", "repository to push the base to (REGISTRY/NAME); empty: only print the digest")
	flag.Parse()
	if err := run(*repo, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "base: %v\n", err)
		os.Exit(1)
	}
}

func run(repo string, out io.Writer) error {
	idx, err := Index()
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return fmt.Errorf("computing the index digest: %w", err)
	}
	if repo == "" {
		_, err := fmt.Fprintln(out, digest)
		return err
	}
	ref, err := name.NewDigest(repo + "@" + digest.String())
	if err != nil {
		return fmt.Errorf("parsing repository %q: %w", repo, err)
	}
	auth := remote.WithAuthFromKeychain(authn.DefaultKeychain)
	// A release pushes the base every time; skipping what the registry already holds keeps
	// that free and leaves a base other releases already point at untouched.
	if _, err := remote.Head(ref, auth); err != nil {
		tag := ref.Context().Tag(Tag)
		if err := remote.WriteIndex(tag, idx, auth); err != nil {
			return fmt.Errorf("pushing %s: %w", tag, err)
		}
	}
	_, err = fmt.Fprintln(out, ref)
	return err
}

// Index is the base image: one image per platform, all sharing the same layer.
func Index() (v1.ImageIndex, error) {
	layerTar, err := rootfs()
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("compressing the layer: %w", err)
	}
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range Platforms {
		img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		img, err = mutate.Append(img, mutate.Addendum{
			Layer: layer,
			// Without an explicit entry mutate records an empty one; this says where it came from.
			History: v1.History{CreatedBy: "hack/release/base", Comment: "CA bundle, nonroot user, /tmp"},
		})
		if err != nil {
			return nil, fmt.Errorf("appending the layer for %s: %w", p, err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cfg = cfg.DeepCopy()
		cfg.OS, cfg.Architecture = p.OS, p.Architecture
		cfg.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
		cfg.Config.WorkingDir = "/home/nonroot"
		// Go reads this path first anyway; setting it also serves tools that only honour the variable.
		cfg.Config.Env = []string{"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
		if img, err = mutate.ConfigFile(img, cfg); err != nil {
			return nil, fmt.Errorf("configuring %s: %w", p, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p},
		})
	}
	return idx, nil
}

type entry struct {
	name     string
	mode     int64
	owner    int
	contents []byte // nil for a directory
}

// rootfs is the layer's tar. Entries are written in name order with fixed metadata, so the
// bytes depend only on the contents.
func rootfs() ([]byte, error) {
	ca, err := caBundle()
	if err != nil {
		return nil, err
	}
	entries := []entry{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, contents: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/passwd", mode: 0o644, contents: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, contents: ca},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, owner: NonRoot},
		{name: "tmp/", mode: 0o1777},
	}
	slices.SortFunc(entries, func(a, b entry) int { return bytes.Compare([]byte(a.name), []byte(b.name)) })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.name,
			Mode:    e.mode,
			Uid:     e.owner,
			Gid:     e.owner,
			ModTime: time.Unix(0, 0),
			// USTAR has no access or change times and no user names, so nothing of the
			// machine building it leaks in.
			Format: tar.FormatUSTAR,
		}
		if e.contents == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("writing %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// caBundle is the NSS root store as PEM, in the module's order. Roots that NSS constrains
// (distrust after a date) are left out: a PEM file cannot carry the constraint, and trusting
// them without it would accept certificates NSS rejects.
func caBundle() ([]byte, error) {
	version, err := moduleVersion(caModule)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# NSS roots from %s %s, without date-constrained roots.\n", caModule, version)
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if _, err := x509.ParseCertificate(root.Certificate); err != nil {
			return nil, fmt.Errorf("root %d of the bundle: %w", n, err)
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("the CA bundle is empty")
	}
	return buf.Bytes(), nil
}

// moduleVersion reads the module's version from the binary's build information, which a test
// binary and `go run` both carry.
func moduleVersion(path string) (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information: build with module support")
	}
	for _, d := range info.Deps {
		if d.Path == path {
			if d.Replace != nil {
				d = d.Replace
			}
			return d.Version, nil
		}
	}
	return "", fmt.Errorf("%s is not in the build information", path)
}
