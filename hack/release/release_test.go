// Package release_test runs the real `make release` twice against a registry on loopback and
// checks that the image and the manifests it produces belong together.
package release_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const version = "v1.2.3-rc.1"

// repoRoot is the repository's root, which the release script and the Makefile run from.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// loopbackRegistry serves an empty, in-memory OCI registry until the test ends and returns its
// host:port.
func loopbackRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ko and the controller for two platforms")
	}
	root := repoRoot(t)
	host := loopbackRegistry(t)
	// Both releases use one base reference: its text is part of the image.
	base := host + "/base"

	repo := host + "/karpenter-clevercloud"
	dist := filepath.Join(t.TempDir(), "dist")
	// The release files the changelog's Unreleased notes; a copy keeps the repository's as is.
	changelog := filepath.Join(t.TempDir(), "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte(changelogBefore), 0o644); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	makeRelease(t, root, repo, base, dist, changelog)
	t.Logf("first release: %s", time.Since(started).Round(time.Second))
	// The heading carries the UTC date the release ran on; either end of it, across midnight.
	released := string(readFile(t, filepath.Dir(changelog), "CHANGELOG.md"))
	if !slices.ContainsFunc([]time.Time{started, time.Now()}, func(day time.Time) bool {
		return released == strings.Replace(changelogBefore, "## [Unreleased]\n",
			"## [Unreleased]\n\n## ["+version+"] - "+day.UTC().Format(time.DateOnly)+"\n", 1)
	}) {
		t.Errorf("CHANGELOG.md after the release: want the Unreleased notes under %s, got\n%s", version, released)
	}

	ref, err := name.NewTag(repo + ":" + version)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatalf("the release tag is not in the registry: %v", err)
	}
	if desc.MediaType != types.OCIImageIndex && desc.MediaType != types.DockerManifestList {
		t.Fatalf("%s is a %s, want an index", ref, desc.MediaType)
	}
	pinned := repo + "@" + desc.Digest.String()

	t.Run("manifests name the pushed index by digest", func(t *testing.T) {
		for _, f := range []string{"install.yaml", "karpenter.yaml"} {
			if got := images(t, readFile(t, dist, f)); !slices.Equal(got, []string{pinned}) {
				t.Errorf("%s: images %q, want only %q", f, got, pinned)
			}
		}
		if got := images(t, readFile(t, dist, "crds.yaml")); len(got) != 0 {
			t.Errorf("crds.yaml names images %q", got)
		}
	})

	t.Run("manifests are cue export with that image", func(t *testing.T) {
		for file, expr := range map[string]string{"install.yaml": "stream", "crds.yaml": "crdStream", "karpenter.yaml": "appStream"} {
			want := run(t, root, filepath.Join(root, "bin/cue"), "export", "./cue", "-t", "image="+pinned, "-e", expr, "--out", "text")
			got, err := os.ReadFile(filepath.Join(dist, file))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from `cue export ./cue -t image=%s -e %s`", file, pinned, expr)
			}
		}
	})

	t.Run("checksums cover every file and match", func(t *testing.T) {
		checkSums(t, dist, []string{"crds.yaml", "install.yaml", "karpenter.yaml"})
	})

	idx, err := desc.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}

	t.Run("both platforms, each on the pinned base", func(t *testing.T) {
		if got, want := platforms(t, idx), []string{"linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
			t.Fatalf("platforms %q, want %q", got, want)
		}
		// ko records the base it built on; it must be the base ko.yaml pins, by digest.
		wantBase := base + "@" + pinnedBase(t, root)
		for _, m := range manifest.Manifests {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if got := raw.Annotations["org.opencontainers.image.base.name"]; got != wantBase {
				t.Errorf("%s: base %q, want %q", m.Platform, got, wantBase)
			}
		}
	})

	t.Run("SBOM attached", func(t *testing.T) {
		// ko's convention (cosign's): the SBOM is tagged after the digest it describes.
		sbom := repo + ":" + strings.Replace(desc.Digest.String(), ":", "-", 1) + ".sbom"
		sref, err := name.NewTag(sbom)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := remote.Head(sref); err != nil {
			t.Errorf("no SBOM at %s: %v", sbom, err)
		}
	})

	t.Run("image for this machine runs as nonroot, trusts the CA bundle, prints the version", func(t *testing.T) {
		img := native(t, idx)
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if uid, _, _ := strings.Cut(cfg.Config.User, ":"); uid != "65532" {
			t.Errorf("user %q, want 65532", cfg.Config.User)
		}
		files := extract(t, img, "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "tmp/")
		if pool := x509.NewCertPool(); !pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"].data) {
			t.Error("the CA bundle holds no certificate")
		}
		if !strings.Contains(string(files["etc/passwd"].data), "nonroot:x:65532:65532:") {
			t.Error("/etc/passwd has no nonroot user")
		}
		if mode := files["tmp/"].mode; mode != 0o1777 {
			t.Errorf("/tmp mode %o, want 1777", mode)
		}
		if got := binaryVersion(t, root, img); got != version {
			t.Errorf("the image's binary prints %q, want %q", got, version)
		}
	})

	t.Run("dev loop: ko resolve -f out/ reads .ko.yaml and renders the release's objects", func(t *testing.T) {
		const devVersion = "v0.0.0-dev.1"
		cmd := exec.CommandContext(ctx(t), filepath.Join(root, "bin/ko"), "resolve", "-f", "out/")
		cmd.Dir = root
		// As a developer types it: no KO_CONFIG_PATH, no --platform, no flags; only the base is
		// overridden, since ko.yaml's is not reachable from here.
		cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "KO_") || strings.HasPrefix(kv, "VERSION=")
		}), "KO_DOCKER_REPO="+host+"/dev", "KO_DEFAULTBASEIMAGE="+base+"@"+pinnedBase(t, root), "VERSION="+devVersion)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		resolved, err := cmd.Output()
		if err != nil {
			t.Fatalf("ko resolve: %v\n%s", err, stderr.Bytes())
		}
		release, err := os.ReadFile(filepath.Join(dist, "install.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		devImages := images(t, resolved)
		if len(devImages) != 1 {
			t.Fatalf("ko resolve names images %q, want one", devImages)
		}
		got := objects(t, bytes.ReplaceAll(resolved, []byte(devImages[0]), []byte(pinned)))
		if want := objects(t, release); !reflect.DeepEqual(got, want) {
			t.Errorf("ko resolve -f out/ renders %d objects that differ from dist/install.yaml's %d beyond the image", len(got), len(want))
		}

		// Both platforms and the version stamp come from .ko.yaml alone.
		dref, err := name.NewDigest(devImages[0])
		if err != nil {
			t.Fatal(err)
		}
		dev, err := remote.Index(dref)
		if err != nil {
			t.Fatal(err)
		}
		if got := platforms(t, dev); !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("dev image platforms %q", got)
		}
		if got := binaryVersion(t, root, native(t, dev)); got != devVersion {
			t.Errorf("dev image's binary prints %q, want %q: .ko.yaml's ldflags were not applied", got, devVersion)
		}
	})

	t.Run("a second release from the same commit has the same digest", func(t *testing.T) {
		// Another repository, so the index there is what the second build pushed.
		again := host + "/again"
		started := time.Now()
		makeRelease(t, root, again, base, filepath.Join(t.TempDir(), "dist"), changelog)
		t.Logf("second release: %s", time.Since(started).Round(time.Second))
		if got := string(readFile(t, filepath.Dir(changelog), "CHANGELOG.md")); got != released {
			t.Errorf("releasing %s again changed CHANGELOG.md:\n%s", version, got)
		}
		d, err := name.NewTag(again + ":" + version)
		if err != nil {
			t.Fatal(err)
		}
		second, err := remote.Head(d)
		if err != nil {
			t.Fatal(err)
		}
		if second.Digest != desc.Digest {
			t.Errorf("second release %s, first %s", second.Digest, desc.Digest)
		}
	})
}

// changelogBefore is a changelog with notes waiting for a release.
const changelogBefore = `# Changelog

## [Unreleased]

### Added

- a feature

## [v1.2.2] - 2026-01-01

### Fixed

- a bug
`

func makeRelease(t *testing.T, root, repo, base, dist, changelog string) {
	t.Helper()
	cmd := exec.CommandContext(ctx(t), "make", "--no-print-directory", "release",
		"VERSION="+version, "KO_DOCKER_REPO="+repo, "BASE_REPO="+base, "DIST="+dist)
	cmd.Dir = root
	// As typed in a shell: the release builds and pushes its own base rather than take one
	// from the caller, and `make test`'s flags and variables do not leak into this make.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, p := range []string{"KO_DEFAULTBASEIMAGE=", "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL="} {
			if strings.HasPrefix(kv, p) {
				return true
			}
		}
		return false
	})
	cmd.Env = append(cmd.Env, "CHANGELOG="+changelog)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, out)
	}
}

// images lists the distinct image references a manifest stream names.
func images(t *testing.T, b []byte) []string {
	t.Helper()
	var refs []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:-\s+)?image:\s*(\S+)\s*$`).FindAllSubmatch(b, -1) {
		refs = append(refs, string(m[1]))
	}
	slices.Sort(refs)
	return slices.Compact(refs)
}

func checkSums(t *testing.T, dir string, want []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.Lines(string(b)) {
		sum, file, ok := strings.Cut(strings.TrimSpace(line), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not `SUM  FILE`", line)
		}
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(data); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: checksum mismatch", file)
		}
		listed = append(listed, file)
	}
	if !slices.Equal(listed, want) {
		t.Errorf("SHA256SUMS lists %q, want %q", listed, want)
	}
}

func readFile(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// objects decodes a YAML stream, skipping empty documents (ko ends each file with one).
func objects(t *testing.T, stream []byte) []map[string]any {
	t.Helper()
	r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []map[string]any
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if obj != nil {
			objs = append(objs, obj)
		}
	}
}

func platforms(t *testing.T, idx v1.ImageIndex) []string {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var ps []string
	for _, m := range im.Manifests {
		if m.Platform != nil {
			ps = append(ps, m.Platform.String())
		}
	}
	slices.Sort(ps)
	return ps
}

// native is the index's image for this machine, whose binary the test can run.
func native(t *testing.T, idx v1.ImageIndex) v1.Image {
	t.Helper()
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range im.Manifests {
		if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == runtime.GOARCH {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Skipf("no image for linux/%s to run", runtime.GOARCH)
	return nil
}

// binaryVersion runs the image's entrypoint with --version.
func binaryVersion(t *testing.T, root string, img v1.Image) string {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Entrypoint) != 1 {
		t.Fatalf("entrypoint %q, want the binary alone", cfg.Config.Entrypoint)
	}
	path := strings.TrimPrefix(cfg.Config.Entrypoint[0], "/")
	bin := filepath.Join(t.TempDir(), "controller")
	if err := os.WriteFile(bin, extract(t, img, path)[path].data, 0o755); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(run(t, root, bin, "--version")))
}

// pinnedBase is the digest ko.yaml pins the base at.
func pinnedBase(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "ko.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^defaultBaseImage:\s*\S+@(sha256:[0-9a-f]{64})\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("ko.yaml pins no defaultBaseImage by digest")
	}
	return string(m[1])
}

type file struct {
	mode int64
	data []byte
}

// extract reads the named paths from the image's flattened filesystem.
func extract(t *testing.T, img v1.Image, paths ...string) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]file{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(h.Name, "/")
		if h.Typeflag == tar.TypeDir && !strings.HasSuffix(name, "/") {
			name += "/"
		}
		if !slices.Contains(paths, name) {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = file{mode: h.Mode, data: data}
	}
	for _, p := range paths {
		if _, ok := files[p]; !ok {
			t.Fatalf("the image has no %s", p)
		}
	}
	return files
}

func run(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(ctx(t), name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return out
}

// ctx ends a minute before the test binary's deadline, so a hung build fails with its output
// instead of the whole binary panicking.
func ctx(t *testing.T) context.Context {
	deadline, ok := t.Deadline()
	if !ok {
		return t.Context()
	}
	c, cancel := context.WithDeadline(t.Context(), deadline.Add(-time.Minute))
	t.Cleanup(cancel)
	return c
}

// The original README's `make image IMAGE=… TAG=…` must reach release.sh as KO_DOCKER_REPO and
// VERSION (a dry run: the real build is TestRelease's).
func TestMakeImageTakesTheOriginalSpelling(t *testing.T) {
	root := repoRoot(t)
	cmd := exec.Command("make", "-n", "image", "IMAGE=registry.example.com/karpenter-clevercloud", "TAG=v0.12.0")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n image: %v\n%s", err, out)
	}
	want := "VERSION=v0.12.0 KO_DOCKER_REPO=registry.example.com/karpenter-clevercloud BASE_REPO=registry.example.com/karpenter-clevercloud/base "
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "release.sh image") {
		t.Errorf("make -n image printed:\n%s\nwant a release.sh image call with %q", out, want)
	}
}
