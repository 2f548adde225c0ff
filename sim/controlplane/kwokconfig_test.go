package controlplane

import (
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// TestKwokConfig: by default a node's status is posted every 20–45 s; with NodeStatusReport
// the status post is at 0.9–1.1 of it; kwok's workers are raised either way, and every
// document still parses. (What the stages do is played by kwok's own code in
// sim/tools/kwok, the module that pins it.)
func TestKwokConfig(t *testing.T) {
	def := kwokConfig(false, 0)
	if strings.Count(def, "durationMilliseconds: 20000\n    jitterDurationMilliseconds: 25000\n") != 1 {
		t.Errorf("default: want the status post at 20 s + 25 s jitter")
	}
	slow := kwokConfig(false, 5*time.Minute)
	if strings.Contains(slow, "durationMilliseconds: 20000") || strings.Count(slow, "durationMilliseconds: 270000\n    jitterDurationMilliseconds: 60000\n") != 1 {
		t.Errorf("5 min: want the status post at 270 s + 60 s jitter")
	}
	if !strings.Contains(kwokConfig(true, 0), "expressionFrom: '.metadata.deletionTimestamp'") || strings.Contains(kwokConfig(true, 0), "#GRACE") {
		t.Errorf("grace periods: the #GRACE lines must be uncommented")
	}
	for _, cfg := range []string{def, slow} {
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
