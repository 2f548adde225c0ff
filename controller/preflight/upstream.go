package preflight

import (
	"context"
	"fmt"
	"reflect"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/catalog"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/settings"
	"github.com/CleverCloud/karpenter-provider-clever-cloud/schema/values"
)

// UpstreamInstall is what the upstream provider's Helm install shows in the cluster: its
// Deployment (every Helm value it uses ends up there), the flavors ConfigMap its chart renders
// from settings.flavors, and its ServiceAccount's annotations.
type UpstreamInstall struct {
	Deployment                *appsv1.Deployment
	Flavors                   []catalog.Override
	ServiceAccountAnnotations map[string]string
}

// findUpstream returns the upstream provider's Deployment, preferring a running one.
func findUpstream(ds []appsv1.Deployment) *appsv1.Deployment {
	var found *appsv1.Deployment
	for i := range ds {
		d := &ds[i]
		if classify(d) != kindUpstream {
			continue
		}
		if found == nil || (d.Spec.Replicas == nil || *d.Spec.Replicas > 0) {
			found = d
		}
	}
	return found
}

// readUpstream reads what upstream's chart renders beside its Deployment. Upstream names its
// flavors ConfigMap after the Deployment ("<fullname>-flavors", key flavors.yaml).
func readUpstream(ctx context.Context, c client.Client, d *appsv1.Deployment) (*UpstreamInstall, error) {
	u := &UpstreamInstall{Deployment: d}
	cm := &corev1.ConfigMap{}
	switch err := c.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name + "-flavors"}, cm); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("reading the upstream flavors ConfigMap %s/%s-flavors: %w", d.Namespace, d.Name, err)
	default:
		if err := yaml.UnmarshalStrict([]byte(cm.Data["flavors.yaml"]), &u.Flavors); err != nil {
			return nil, fmt.Errorf("decoding flavors.yaml of ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	if name := d.Spec.Template.Spec.ServiceAccountName; name != "" {
		sa := &corev1.ServiceAccount{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: name}, sa); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading the upstream ServiceAccount %s/%s: %w", d.Namespace, name, err)
		default:
			u.ServiceAccountAnnotations = sa.Annotations
		}
	}
	return u, nil
}

// settingField is one setting as the values spell it (its path under settings) and how its
// environment variable's text converts to the value's type.
type settingField struct {
	path []string
	kind reflect.Kind
	// def is the setting's default in the bundle, as its variable spells it.
	def string
}

// settingsByEnv maps every setting's environment variable to its path under values.settings,
// read from the settings type's own tags, so that the mapping follows the binary.
func settingsByEnv() map[string]settingField {
	out := map[string]settingField{}
	durationType := reflect.TypeFor[settings.Duration]()
	var walk func(t reflect.Type, prefix []string)
	walk = func(t reflect.Type, prefix []string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" || name == "" {
				continue
			}
			path := append(append([]string(nil), prefix...), name)
			if env := f.Tag.Get("env"); env != "" {
				def := f.Tag.Get("default")
				if b, ok := values.BundleDefaults[strings.Join(path, ".")]; ok {
					def = fmt.Sprint(b)
				}
				out[env] = settingField{path: path, kind: f.Type.Kind(), def: def}
				continue
			}
			if f.Type.Kind() == reflect.Struct && f.Type != durationType {
				walk(f.Type, path)
			}
		}
	}
	walk(reflect.TypeFor[settings.Settings](), nil)
	return out
}
