//go:build bench

package bench

// The hot-path runner, used only by TestBench (bench tag).

import (
	"testing"
)

// runHotPaths runs HotPaths with testing.Benchmark.
func runHotPaths() []HotPath {
	var out []HotPath
	for _, h := range HotPaths {
		r := testing.Benchmark(h.F)
		out = append(out, HotPath{Name: h.Name, N: r.N, NsPerOp: float64(r.T.Nanoseconds()) / float64(max(r.N, 1)), BytesPerOp: r.AllocedBytesPerOp(), AllocsPerOp: r.AllocsPerOp()})
	}
	return out
}
