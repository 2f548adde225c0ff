//go:build bench

package bench

// The bench run's knobs, read from the environment (bench tag: only the bench's scenarios read them).

import (
	"os"
	"strconv"
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
