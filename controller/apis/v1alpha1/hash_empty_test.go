package v1alpha1

import (
	"testing"

	. "github.com/onsi/gomega"
)

// spec.labels nil and {} are the same class: hashing them differently would read as drift.
func TestHashNilAndEmptyLabelsAreEqual(t *testing.T) {
	NewWithT(t).Expect(classWith(map[string]LabelValue{}).Hash()).To(Equal(classWith(nil).Hash()))
}
