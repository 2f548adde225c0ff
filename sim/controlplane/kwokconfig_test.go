package controlplane

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestKwokConfig: a node's status is posted at 0.9–1.1 of the NodeStatusReport given (New
// defaults it to a real kubelet's 5 minutes); kwok's workers are raised; every document still
// parses. (What the stages do is played by kwok's own code in
// sim/tools/kwok, the module that pins it.)
func TestKwokConfig(t *testing.T) {
	def := kwokConfig(false, KubeletStatusReport)
	if strings.Contains(def, "#REPORT") || strings.Count(def, "durationMilliseconds: 270000\n    jitterDurationMilliseconds: 60000\n") != 1 {
		t.Errorf("5 min: want the status post at 270 s + 60 s jitter")
	}
	fast := kwokConfig(false, 25*time.Second)
	if strings.Count(fast, "durationMilliseconds: 22500\n    jitterDurationMilliseconds: 5000\n") != 1 {
		t.Errorf("25 s: want the status post at 22.5 s + 5 s jitter")
	}
	if graced := kwokConfig(true, KubeletStatusReport); !strings.Contains(graced, "expressionFrom: '.metadata.deletionTimestamp'") || strings.Contains(graced, "#GRACE") {
		t.Errorf("grace periods: the #GRACE lines must be uncommented")
	}
	for _, cfg := range []string{def, fast} {
		if !strings.Contains(cfg, "kind: KwokConfiguration") || !strings.Contains(cfg, "nodePlayStageParallelism: 32") {
			t.Errorf("kwok's options missing")
		}
		for i, doc := range strings.Split(cfg, "\n---\n") {
			var v map[string]any
			if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
				t.Errorf("document %d does not parse: %v", i, err)
			}
		}
	}
}
