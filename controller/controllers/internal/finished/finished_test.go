package finished_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/CleverCloud/karpenter-provider-clever-cloud/controller/controllers/internal/finished"
)

func node(uid string, labelled bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: k8stypes.UID("uid-" + uid)}}
	if labelled {
		n.Labels = map[string]string{"kept": "yes"}
	}
	return n
}

func kept(o client.Object) bool { return o.GetLabels()["kept"] == "yes" }

func TestAFinishedObjectIsDroppedUntilItIsDeleted(t *testing.T) {
	for _, passDeletes := range []bool{false, true} {
		var s finished.Set
		p := s.Predicate(kept, passDeletes)
		a, other := node("a", true), node("b", false)
		if !p.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: a}) || p.Create(event.CreateEvent{Object: other}) {
			t.Fatal("before Add, the predicate must pass what keep accepts, and only that")
		}
		s.Add(a.UID)
		if p.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: a}) || p.Create(event.CreateEvent{Object: a}) || p.Generic(event.GenericEvent{Object: a}) {
			t.Error("a finished object's events passed")
		}
		if got := p.Delete(event.DeleteEvent{Object: a}); got != passDeletes {
			t.Errorf("passDeletes %v: the deletion passed %v", passDeletes, got)
		}
		if p.Delete(event.DeleteEvent{Object: other}) {
			t.Error("the deletion of an object keep refuses passed")
		}
		if s.Has(a.UID) || !p.Create(event.CreateEvent{Object: a}) {
			t.Error("a deleted object is still remembered")
		}
	}
}
