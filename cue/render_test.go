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
	"sigs.k8s.io/yaml"
)

// digestRef is an image reference a cluster can pull: a registry host, a repository, a digest.
const digestRef = "registry.example.com/karpenter/controller@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// makeRender runs `make render` as a user does, with OUT in a temporary directory; it returns
// the output file's path, make's stderr and whether it exited 0.
func makeRender(t *testing.T, vars ...string) (string, string, bool) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "install.yaml")
	args := append([]string{"-s", "--no-print-directory", "render", "OUT=" + out}, vars...)
	cmd := exec.Command("make", args...)
	cmd.Dir = root
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=") || strings.HasPrefix(kv, "IMAGE=") || strings.HasPrefix(kv, "VALUES=")
	})
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("make render: %v", err)
	}
	return out, stderr.String(), err == nil
}

// TestMakeRenderRefusesImages: an image a cluster cannot pull is refused before anything is
// written, with what to do instead.
func TestMakeRenderRefusesImages(t *testing.T) {
	for _, tc := range []struct{ image, want string }{
		{"", "IMAGE is empty"},
		{"ko://github.com/CleverCloud/karpenter-provider-clever-cloud/controller", "only ko resolves"},
		{"karpenter:v1", "names no registry host"},
		{"karpenter/controller@sha256:0123", "names no registry host"},
		{"registry.example.com:5000/karpenter", "neither a digest nor a tag"},
	} {
		t.Run(tc.image, func(t *testing.T) {
			out, stderr, ok := makeRender(t, "IMAGE="+tc.image)
			if ok {
				t.Fatalf("make render IMAGE=%q succeeded; want a refusal", tc.image)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("make render IMAGE=%q: the message does not say %q:\n%s", tc.image, tc.want, stderr)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("make render IMAGE=%q left %s behind", tc.image, out)
			}
		})
	}
	t.Run("missing values file", func(t *testing.T) {
		_, stderr, ok := makeRender(t, "IMAGE="+digestRef, "VALUES=/nonexistent/my-values.yaml")
		if ok || !strings.Contains(stderr, "no such file") {
			t.Errorf("make render with a missing values file: ok %v, stderr %s", ok, stderr)
		}
	})
	t.Run("bad values", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "my-values.yaml")
		if err := os.WriteFile(values, []byte("replica: 3\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, ok := makeRender(t, "IMAGE="+digestRef, "VALUES="+values)
		if ok || !strings.Contains(stderr, "values.replica") {
			t.Errorf("make render with an unknown key: ok %v, stderr %s", ok, stderr)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("a failed render left %s behind", out)
		}
	})
}

// TestMakeRender: the image and the values land in the Deployment, nothing names ko://, and
// a release version names the runbooks of that release.
func TestMakeRender(t *testing.T) {
	values := filepath.Join(t.TempDir(), "my-values.yaml")
	if err := os.WriteFile(values, []byte("replicas: 1\nprometheusRule: {enabled: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, ok := makeRender(t, "IMAGE="+digestRef, "VALUES="+values, "VERSION=v1.2.3")
	if !ok {
		t.Fatalf("make render failed:\n%s", stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("ko://")) {
		t.Error("the rendered YAML names a ko:// image")
	}
	var dep *appsv1.Deployment
	crdsBefore := true
	for doc := range strings.SplitSeq(string(b), "\n---\n") {
		var head struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatal(err)
		}
		if head.Kind == "CustomResourceDefinition" && !crdsBefore {
			t.Error("a CRD comes after other objects: kubectl apply would create objects before their CRD")
		}
		if head.Kind != "CustomResourceDefinition" {
			crdsBefore = false
		}
		if head.Kind == "Deployment" {
			dep = &appsv1.Deployment{}
			if err := yaml.Unmarshal([]byte(doc), dep); err != nil {
				t.Fatal(err)
			}
		}
	}
	if dep == nil {
		t.Fatal("no Deployment rendered")
	}
	if got := dep.Spec.Template.Spec.Containers[0].Image; got != digestRef {
		t.Errorf("the controller's image is %q, want %q", got, digestRef)
	}
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
		t.Errorf("replicas %v, want the values' 1", dep.Spec.Replicas)
	}
	if !bytes.Contains(b, []byte("/blob/v1.2.3/docs/alerts.md#")) {
		t.Error("the runbook links do not name the release v1.2.3")
	}
	if bytes.Contains(b, []byte("/blob/main/")) {
		t.Error("a runbook link names the main branch in a release's render")
	}
}
