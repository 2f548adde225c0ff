package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func digest(t *testing.T) string {
	t.Helper()
	idx, err := Index()
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func TestIndexIsReproducible(t *testing.T) {
	if a, b := digest(t), digest(t); a != b {
		t.Fatalf("two builds differ: %s, %s", a, b)
	}
}

// ko.yaml pins the base by digest; a change to the inputs (the CA module's version, the files
// above, the Go toolchain's gzip) must come with a new pin, or users would build on an old base.
func TestKoYAMLPinsThisBase(t *testing.T) {
	b, err := os.ReadFile("../../../ko.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^defaultBaseImage:\s*\S+@(sha256:[0-9a-f]{64})\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("ko.yaml pins no defaultBaseImage by digest")
	}
	if got, want := string(m[1]), digest(t); got != want {
		t.Errorf("ko.yaml pins %s; hack/release/base builds %s: update defaultBaseImage", got, want)
	}
}

func TestIndexHasBothPlatformsAsNonRoot(t *testing.T) {
	idx, err := Index()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, m := range im.Manifests {
		platforms = append(platforms, m.Platform.String())
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Config.User != "65532:65532" {
			t.Errorf("%s: user %q", m.Platform, cfg.Config.User)
		}
		if got := cfg.Platform().String(); got != m.Platform.String() {
			t.Errorf("config says %s, index says %s", got, m.Platform)
		}
	}
	if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(platforms, want) {
		t.Errorf("platforms %q, want %q", platforms, want)
	}
}

func TestLayer(t *testing.T) {
	b, err := rootfs()
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(bytes.NewReader(b))
	var names []string
	modes := map[string]int64{}
	var ca []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		modes[h.Name] = h.Mode
		if h.ModTime.Unix() != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v, owner %q:%q; want 0 and numeric owners", h.Name, h.ModTime, h.Uname, h.Gname)
		}
		if h.Name == "home/nonroot/" && (h.Uid != NonRoot || h.Gid != NonRoot) {
			t.Errorf("home/nonroot/ owned by %d:%d", h.Uid, h.Gid)
		}
		if h.Name == "etc/ssl/certs/ca-certificates.crt" {
			if ca, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !slices.IsSorted(names) {
		t.Errorf("entries not sorted: %q", names)
	}
	if modes["tmp/"] != 0o1777 {
		t.Errorf("tmp/ mode %o, want 1777", modes["tmp/"])
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("the CA bundle holds no certificate")
	}
	// NSS holds well over a hundred server roots; a handful would mean the source changed shape.
	if n := strings.Count(string(ca), "BEGIN CERTIFICATE"); n < 100 {
		t.Errorf("the CA bundle holds %d roots", n)
	}
}

// The second push of the same base finds it present and still prints the same reference.
func TestRunPushesOnceAndPrintsTheDigestReference(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/base"
	var first, second bytes.Buffer
	if err := run(repo, &first); err != nil {
		t.Fatal(err)
	}
	if err := run(repo, &second); err != nil {
		t.Fatal(err)
	}
	want := repo + "@" + digest(t) + "\n"
	if first.String() != want || second.String() != want {
		t.Errorf("printed %q then %q, want %q", first.String(), second.String(), want)
	}
	tag, err := name.NewTag(repo + ":" + Tag)
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(tag)
	if err != nil {
		t.Fatal(err)
	}
	if repo+"@"+d.Digest.String()+"\n" != want {
		t.Errorf("%s is %s, want %s", tag, d.Digest, want)
	}
}
