//go:build bench

package bench

// The bench run's knobs and its hot-path runner, used only by TestBench (bench tag).

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// envInt reads an integer knob with a default.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// envDuration reads a duration knob with a default.
func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// runHotPaths runs HotPaths with testing.Benchmark.
func runHotPaths() []HotPath {
	var out []HotPath
	for _, h := range HotPaths {
		r := testing.Benchmark(h.F)
		out = append(out, HotPath{Name: h.Name, N: r.N, NsPerOp: float64(r.T.Nanoseconds()) / float64(max(r.N, 1)), BytesPerOp: r.AllocedBytesPerOp(), AllocsPerOp: r.AllocsPerOp()})
	}
	return out
}
