package bundle_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// userValues is a values file as the README's install path writes it, with a pull Secret for
// a private registry.
const userValues = `replicas: 1
image:
  pullSecrets: [regcred]
prometheusRule: {enabled: true}
`

// runMake runs make in the checkout with a user's environment: no outer make's flags, none of
// the variables the targets read unless given.
func runMake(t *testing.T, env []string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory"}, args...)...)
	cmd.Dir = root
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		for _, p := range []string{"MAKEFLAGS=", "MAKELEVEL=", "MFLAGS=", "IMAGE=", "VALUES=", "VERSION=", "TAG=", "KO_", "BUNDLE_DIR=", "DEV_KO="} {
			if strings.HasPrefix(kv, p) {
				return true
			}
		}
		return false
	}), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("make %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), err == nil
}

// kinds are the kinds of a YAML stream's documents, in order.
func kinds(t *testing.T, stream []byte) []string {
	t.Helper()
	var out []string
	for doc := range strings.SplitSeq(string(stream), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		out = append(out, head.Kind)
	}
	return out
}

// decodeDeployment is the stream's one Deployment, decoded strictly into the Go type.
func decodeDeployment(t *testing.T, stream []byte) *appsv1.Deployment {
	t.Helper()
	var dep *appsv1.Deployment
	for doc := range strings.SplitSeq(string(stream), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind != "Deployment" {
			continue
		}
		if dep != nil {
			t.Fatal("two Deployments in the stream")
		}
		dep = &appsv1.Deployment{}
		if err := yaml.UnmarshalStrict([]byte(doc), dep); err != nil {
			t.Fatal(err)
		}
	}
	if dep == nil {
		t.Fatal("no Deployment in the stream")
	}
	return dep
}

// TestMakeBundle: the user's route to install YAML writes the three files where asked, for the
// image given, with the values (pull Secret included) in the Deployment, and leaves the
// changelog and any earlier bundle alone when it refuses.
func TestMakeBundle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "karpenter-clevercloud")
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(userValues), 0o644); err != nil {
		t.Fatal(err)
	}
	changelog := readFileT(t, filepath.Join(root, "CHANGELOG.md"))

	out, ok := runMake(t, nil, "bundle", "IMAGE="+digestRef, "VALUES="+values, "BUNDLE_DIR="+dir)
	if !ok {
		t.Fatalf("make bundle failed:\n%s", out)
	}
	crds := readFileT(t, filepath.Join(dir, "crds.yaml"))
	app := readFileT(t, filepath.Join(dir, "karpenter.yaml"))
	install := readFileT(t, filepath.Join(dir, "install.yaml"))

	if k := kinds(t, crds); len(k) == 0 || slices.ContainsFunc(k, func(s string) bool { return s != "CustomResourceDefinition" }) {
		t.Errorf("crds.yaml holds %q, want CRDs only", k)
	}
	if k := kinds(t, app); slices.Contains(k, "CustomResourceDefinition") || !slices.Contains(k, "Deployment") {
		t.Errorf("karpenter.yaml holds %q, want the controller's objects and no CRD", k)
	}
	if got, want := kinds(t, install), append(kinds(t, crds), kinds(t, app)...); !slices.Equal(got, want) {
		t.Errorf("install.yaml holds %q, want crds.yaml then karpenter.yaml: %q", got, want)
	}
	if bytes.Contains(install, []byte("ko://")) {
		t.Error("install.yaml names a ko:// image")
	}

	dep := decodeDeployment(t, install)
	pod := dep.Spec.Template.Spec
	if got := pod.Containers[0].Image; got != digestRef {
		t.Errorf("image %q, want %q", got, digestRef)
	}
	if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !slices.Equal(pod.ImagePullSecrets, want) {
		t.Errorf("imagePullSecrets %v, want the values' %v", pod.ImagePullSecrets, want)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want the values' 1", dep.Spec.Replicas)
	}
	// No VERSION given: the runbooks are the tag the checkout is at, else main's; never a
	// git-describe name that no tree carries.
	ref := "main"
	if tag, err := exec.Command("git", "-C", root, "describe", "--tags", "--exact-match").Output(); err == nil {
		ref = strings.TrimSpace(string(tag))
	}
	if !bytes.Contains(install, []byte("/blob/"+ref+"/docs/alerts.md#")) {
		t.Errorf("the runbook links do not name %s", ref)
	}
	if !bytes.Equal(readFileT(t, filepath.Join(root, "CHANGELOG.md")), changelog) {
		t.Error("make bundle changed CHANGELOG.md")
	}

	t.Run("a refused value leaves the earlier bundle", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(bad, []byte("replicas: 1\nreplica: 3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, ok := runMake(t, nil, "bundle", "IMAGE="+digestRef, "VALUES="+bad, "BUNDLE_DIR="+dir)
		if ok || !strings.Contains(out, "values.replica") {
			t.Errorf("make bundle with an unknown key: ok %v, want a refusal naming values.replica:\n%s", ok, out)
		}
		if !bytes.Equal(readFileT(t, filepath.Join(dir, "install.yaml")), install) {
			t.Error("a refused render changed install.yaml")
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 3 {
			t.Errorf("the bundle directory holds %d entries after a refusal, want the 3 files", len(entries))
		}
	})

	t.Run("refusals before any work", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"no directory", []string{"IMAGE=" + digestRef}, "set BUNDLE_DIR"},
			{"no image, no repository", []string{"BUNDLE_DIR=" + t.TempDir()}, "give IMAGE="},
			{"a ko path", []string{"BUNDLE_DIR=" + t.TempDir(), "IMAGE=ko://example.com/x"}, "only ko resolves"},
		} {
			out, ok := runMake(t, nil, append([]string{"bundle"}, tc.args...)...)
			if ok || !strings.Contains(out, tc.want) {
				t.Errorf("%s: ok %v, want a refusal saying %q:\n%s", tc.name, ok, tc.want, out)
			}
		}
	})
}

// TestMakeDev: the dev loop with values hands ko one stream, CRDs first, holding the values and
// the bundle's ko:// reference for ko to build, with the registry and base it was given. ko
// is a stand-in that keeps what it is given: the real one's build and push are
// hack/release's tests.
func TestMakeDev(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(userValues), 0o644); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	fake := filepath.Join(work, "ko")
	script := `#!/usr/bin/env bash
set -eu
printf '%s\n' "$@" >"$KEEP/args"
printf '%s\n%s\n' "$KO_DOCKER_REPO" "$KO_DEFAULTBASEIMAGE" >"$KEEP/env"
cp "$3" "$KEEP/applied.yaml"
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	base := "registry.example.com/karpenter/base@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	env := []string{"KEEP=" + work, "KO_DEFAULTBASEIMAGE=" + base}
	out, ok := runMake(t, env, "dev", "KO_DOCKER_REPO=registry.example.com/karpenter", "VALUES="+values, "DEV_KO="+fake)
	if !ok {
		t.Fatalf("make dev failed:\n%s", out)
	}
	args := strings.Fields(string(readFileT(t, filepath.Join(work, "args"))))
	if len(args) != 3 || args[0] != "apply" || args[1] != "-f" {
		t.Fatalf("ko was run with %q, want apply -f FILE", args)
	}
	if _, err := os.Stat(args[2]); !os.IsNotExist(err) {
		t.Errorf("make dev left its rendered %s behind", args[2])
	}
	if got := strings.Fields(string(readFileT(t, filepath.Join(work, "env")))); !slices.Equal(got, []string{"registry.example.com/karpenter", base}) {
		t.Errorf("ko ran with KO_DOCKER_REPO, KO_DEFAULTBASEIMAGE %q", got)
	}
	applied := readFileT(t, filepath.Join(work, "applied.yaml"))
	k := kinds(t, applied)
	firstOther := slices.IndexFunc(k, func(s string) bool { return s != "CustomResourceDefinition" })
	if len(k) == 0 || k[0] != "CustomResourceDefinition" || firstOther < 0 || slices.Contains(k[firstOther:], "CustomResourceDefinition") {
		t.Errorf("ko was given %q, want the CRDs before the controller", k)
	}
	dep := decodeDeployment(t, applied)
	pod := dep.Spec.Template.Spec
	if got := pod.Containers[0].Image; !strings.HasPrefix(got, "ko://") {
		t.Errorf("image %q, want the bundle's ko:// reference for ko to build", got)
	}
	if want := []corev1.LocalObjectReference{{Name: "regcred"}}; !slices.Equal(pod.ImagePullSecrets, want) {
		t.Errorf("imagePullSecrets %v, want the values' %v", pod.ImagePullSecrets, want)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want the values' 1", dep.Spec.Replicas)
	}

	t.Run("no registry", func(t *testing.T) {
		out, ok := runMake(t, env, "dev", "VALUES="+values, "DEV_KO="+fake)
		if ok || !strings.Contains(out, "set KO_DOCKER_REPO") {
			t.Errorf("make dev without KO_DOCKER_REPO: ok %v, want a refusal:\n%s", ok, out)
		}
	})
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
