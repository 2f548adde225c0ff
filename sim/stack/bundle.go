package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	karpapis "sigs.k8s.io/karpenter/pkg/apis"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	ngv1 "github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/nodegroup/v1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/apis/v1alpha1"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/sim"
)

// FieldOwner is the server-side apply field manager of everything the stack applies.
const FieldOwner = "karpenter-e2e"

// Scheme knows the built-in kinds, CRDs, NodeGroup, CleverNodeClass and Karpenter's kinds.
func Scheme() *runtime.Scheme {
	s := sim.Scheme()
	_ = v1alpha1.AddToScheme(s)
	gv := schema.GroupVersion{Group: karpapis.Group, Version: "v1"}
	metav1.AddToGroupVersion(s, gv)
	s.AddKnownTypes(gv, &karpv1.NodePool{}, &karpv1.NodePoolList{}, &karpv1.NodeClaim{}, &karpv1.NodeClaimList{})
	return s
}

// Bundle is the rendered installation, as shipped.
type Bundle struct {
	CRDs []*unstructured.Unstructured
	// Objects are out/karpenter.yaml's documents, in order.
	Objects []*unstructured.Unstructured
	// Deployment is the controller's Deployment.
	Deployment *appsv1.Deployment
}

// Workload kinds cannot run without an image and a kubelet; the stack runs the binary in
// their place.
var notApplied = map[string]bool{"Deployment": true, "Service": true, "PodDisruptionBudget": true}

// LoadBundle reads out/crds.yaml and out/karpenter.yaml.
func LoadBundle(dir string) (*Bundle, error) {
	b := &Bundle{}
	var err error
	if b.CRDs, err = DecodeFile(filepath.Join(dir, "crds.yaml")); err != nil {
		return nil, err
	}
	if b.Objects, err = DecodeFile(filepath.Join(dir, "karpenter.yaml")); err != nil {
		return nil, err
	}
	for _, u := range b.Objects {
		if u.GetKind() != "Deployment" {
			continue
		}
		d := &appsv1.Deployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
			return nil, fmt.Errorf("decoding the bundle's Deployment: %w", err)
		}
		b.Deployment = d
	}
	if b.Deployment == nil {
		return nil, fmt.Errorf("%s/karpenter.yaml has no Deployment", dir)
	}
	return b, nil
}

// Install is every object of out/karpenter.yaml the stack applies: all but the workload.
func (b *Bundle) Install() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range b.Objects {
		if !notApplied[u.GetKind()] {
			out = append(out, u)
		}
	}
	return out
}

// ConfigMaps are the bundle's ConfigMaps (the flavors overrides, when settings.flavors is set).
func (b *Bundle) ConfigMaps() []*corev1.ConfigMap {
	var out []*corev1.ConfigMap
	for _, u := range b.Objects {
		if u.GetKind() != "ConfigMap" {
			continue
		}
		cm := &corev1.ConfigMap{}
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, cm) == nil {
			out = append(out, cm)
		}
	}
	return out
}

// Container is the controller container of the Deployment.
func (b *Bundle) Container() corev1.Container { return b.Deployment.Spec.Template.Spec.Containers[0] }

// DecodeFile decodes a multi-document YAML file into objects, skipping empty documents.
func DecodeFile(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// Decode decodes a multi-document YAML stream.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &u.Object); err != nil {
			return nil, err
		}
		if len(u.Object) == 0 {
			continue
		}
		out = append(out, u)
	}
}

// Apply server-side applies objects as the admin (field manager FieldOwner, forced).
func (e *Env) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, u := range objs {
		if err := e.apply(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// ApplyFile applies every document of a YAML file (relative paths are from the repository
// root) and returns the objects.
func (e *Env) ApplyFile(ctx context.Context, path string) ([]*unstructured.Unstructured, error) {
	if !filepath.IsAbs(path) {
		path = filepath.Join(e.root, path)
	}
	objs, err := DecodeFile(path)
	if err != nil {
		return nil, err
	}
	return objs, e.Apply(ctx, objs...)
}

func (e *Env) apply(ctx context.Context, u *unstructured.Unstructured) error {
	u = u.DeepCopy()
	u.SetManagedFields(nil)
	u.SetResourceVersion("")
	if err := e.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig for a REST config with client-certificate credentials.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sim"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData, CertificateAuthority: cfg.CAFile}
	kc.AuthInfos["karpenter"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		ClientCertificate: cfg.CertFile, ClientKey: cfg.KeyFile,
		Token: cfg.BearerToken, Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups,
	}
	kc.Contexts["karpenter"] = &clientcmdapi.Context{Cluster: "sim", AuthInfo: "karpenter"}
	kc.CurrentContext = "karpenter"
	return clientcmd.WriteToFile(*kc, path)
}

func init() {
	// Events and typed clients on client-go's scheme decode our kinds too.
	_ = ngv1.AddToScheme(scheme.Scheme)
}
