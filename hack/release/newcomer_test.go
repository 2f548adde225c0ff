package release_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The README's dev loop names this registry; the test swaps in its own.
const readmeRepo = "registry.example.com/karpenter"

// koImport is the image reference out/ carries until ko resolves it.
const koImport = "ko://github.com/CleverCloud/karpenter-provider-clever-cloud/controller"

// TestNewcomerDevLoop runs the README's dev loop as someone who has a registry and nothing
// else: no base published anywhere (ko.yaml's is not reachable from here), a registry holding
// nothing, KO_DOCKER_REPO the only setting. It runs the README's own lines, with `ko apply`
// replaced by `ko resolve`: resolve is the same build, push and rewrite of out/ that apply
// does, minus piping the result to `kubectl apply`, so no cluster is needed to see what the
// cluster would be given.
func TestNewcomerDevLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ko and the controller for two platforms")
	}
	root := repoRoot(t)
	host := loopbackRegistry(t)
	reg, err := name.NewRegistry(host)
	if err != nil {
		t.Fatal(err)
	}
	if repos, err := remote.Catalog(ctx(t), reg); err != nil || len(repos) != 0 {
		t.Fatalf("the registry should start empty: repositories %q, err %v", repos, err)
	}
	repo := host + "/karpenter"

	script := readmeDevLoop(t, root)
	if !strings.Contains(script, readmeRepo) {
		t.Fatalf("the README's dev loop does not set KO_DOCKER_REPO to %s:\n%s", readmeRepo, script)
	}
	script = strings.ReplaceAll(script, readmeRepo, repo)
	script = strings.Replace(script, "ko apply -f out/", "ko resolve -f out/", 1)

	// The newcomer's ko is the pinned one, built the way the Makefile builds it; only it is
	// added to PATH, so the script cannot lean on bin/'s other tools.
	run(t, root, "make", "--no-print-directory", filepath.Join(root, "bin/ko"))
	koDir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "bin/ko"), filepath.Join(koDir, "ko")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx(t), "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = root
	cmd.Env = newcomerEnv(koDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	resolved, err := cmd.Output()
	if err != nil {
		t.Fatalf("the README's dev loop failed: %v\nscript:\n%s\n%s", err, script, stderr.Bytes())
	}

	refs := images(t, resolved)
	if len(refs) != 1 {
		t.Fatalf("the resolved manifests name images %q, want exactly one", refs)
	}
	ref, err := name.NewDigest(refs[0])
	if err != nil {
		t.Fatalf("the resolved manifests name %q, not an image by digest: %v", refs[0], err)
	}
	if got := ref.Context().String(); !strings.HasPrefix(got, repo+"/") {
		t.Errorf("the image went to %s, want a repository under KO_DOCKER_REPO %s", got, repo)
	}

	t.Run("out/ is applied as rendered, with the pushed image in place of ko://", func(t *testing.T) {
		if bytes.Contains(resolved, []byte("ko://")) {
			t.Error("a ko:// reference is left in the resolved manifests")
		}
		var want []map[string]any
		entries, err := os.ReadDir(filepath.Join(root, "out"))
		if err != nil {
			t.Fatal(err)
		}
		// ko reads the directory in name order, as os.ReadDir lists it.
		for _, e := range entries {
			if e.IsDir() || filepath.Ext(e.Name()) != ".yaml" {
				continue
			}
			b := bytes.ReplaceAll(readFile(t, filepath.Join(root, "out"), e.Name()), []byte(koImport), []byte(ref.String()))
			want = append(want, objects(t, b)...)
		}
		if got := objects(t, resolved); !reflect.DeepEqual(got, want) {
			t.Errorf("the resolved manifests hold %d objects that differ from out/'s %d beyond the image", len(got), len(want))
		}
	})

	desc, err := remote.Get(ref)
	if err != nil {
		t.Fatalf("the resolved image is not in the registry: %v", err)
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		t.Fatalf("%s is a %s, want an index: %v", ref, desc.MediaType, err)
	}
	pinned := pinnedBase(t, root)

	t.Run("built on the project's base, pushed beside the image", func(t *testing.T) {
		if got := platforms(t, idx); !slices.Equal(got, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("platforms %q, want linux/amd64 and linux/arm64", got)
		}
		// The base ko.yaml pins, so the dev image runs on the same files as a release.
		base := repo + "/base@" + pinned
		bref, err := name.NewDigest(base)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := remote.Head(bref); err != nil {
			t.Errorf("the project's base is not at %s: %v", base, err)
		}
		manifest, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range manifest.Manifests {
			img, err := idx.Image(m.Digest)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := img.Manifest()
			if err != nil {
				t.Fatal(err)
			}
			if got := raw.Annotations["org.opencontainers.image.base.name"]; got != base {
				t.Errorf("%s: base %q, want %q", m.Platform, got, base)
			}
		}
	})

	t.Run("the Deployment runs the image's entrypoint, the controller, as nonroot", func(t *testing.T) {
		container := controllerContainer(t, resolved)
		if got := container["image"]; got != ref.String() {
			t.Errorf("the controller container's image is %v, want %s", got, ref)
		}
		// With neither set, the kubelet starts the image's entrypoint.
		for _, k := range []string{"command", "args"} {
			if v, ok := container[k]; ok {
				t.Errorf("the controller container sets %s %v: the image's entrypoint would not run as is", k, v)
			}
		}
		img := native(t, idx)
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		// runAsNonRoot without runAsUser: the kubelet starts the pod only if the image's user
		// is a numeric uid other than 0, and the nonroot user's name would not do.
		if uid, _, _ := strings.Cut(cfg.Config.User, ":"); uid != "65532" {
			t.Errorf("user %q, want 65532", cfg.Config.User)
		}
		// No VERSION in the newcomer's shell: .ko.yaml stamps "dev", as `go build` would.
		if got := binaryVersion(t, root, img); got != "dev" {
			t.Errorf("the entrypoint %q prints %q for --version, want the controller's dev", cfg.Config.Entrypoint, got)
		}
	})
}

// readmeDevLoop is the README's first sh block that runs `ko apply -f out/`, up to that line.
func readmeDevLoop(t *testing.T, root string) string {
	t.Helper()
	var block []string
	in := false
	sc := bufio.NewScanner(bytes.NewReader(readFile(t, root, "README.md")))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && line == "```sh":
			in, block = true, nil
		case in && line == "```":
			in = false
		case in:
			block = append(block, line)
			if strings.TrimSpace(line) == "ko apply -f out/" {
				return strings.Join(block, "\n") + "\n"
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatal("README.md has no sh block with a `ko apply -f out/` line")
	return ""
}

// newcomerEnv is this machine's environment as a fresh shell has it: none of ko's, the
// Makefile's or an outer make's settings, and ko on PATH.
func newcomerEnv(koDir string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, p := range []string{"KO_", "KOCACHE=", "VERSION=", "BASE_REPO=", "DIST=", "MAKEFLAGS=", "MFLAGS=", "MAKELEVEL=", "PATH="} {
			if strings.HasPrefix(kv, p) {
				return true
			}
		}
		return false
	})
	return append(env, "PATH="+koDir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// controllerContainer is the container named controller in the stream's Deployment.
func controllerContainer(t *testing.T, stream []byte) map[string]any {
	t.Helper()
	for _, obj := range objects(t, stream) {
		if obj["kind"] != "Deployment" {
			continue
		}
		spec, _ := obj["spec"].(map[string]any)
		tmpl, _ := spec["template"].(map[string]any)
		pod, _ := tmpl["spec"].(map[string]any)
		containers, _ := pod["containers"].([]any)
		for _, c := range containers {
			if c, ok := c.(map[string]any); ok && c["name"] == "controller" {
				return c
			}
		}
	}
	t.Fatal("no Deployment with a controller container in the resolved manifests")
	return nil
}
