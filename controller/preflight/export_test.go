package preflight

import "github.com/prometheus/client_golang/prometheus"

// CheckGauge is the preflight gauge, for tests.
func CheckGauge() *prometheus.GaugeVec { return checkGauge }

// SettingsByEnv exposes the env-to-values mapping, for tests.
func SettingsByEnv() map[string][]string {
	out := map[string][]string{}
	for env, f := range settingsByEnv() {
		out[env] = f.path
	}
	return out
}

// WithOffKarpenter exposes the affinity guard, for tests.
var WithOffKarpenter = withOffKarpenter
