package settings

import (
	"regexp"
	"sync"
)

var (
	patternsMu sync.Mutex
	patterns   = map[string]*regexp.Regexp{}
)

// mustCompile caches the struct tags' patterns; a bad pattern is a programming error.
func mustCompile(p string) *regexp.Regexp {
	patternsMu.Lock()
	defer patternsMu.Unlock()
	re, ok := patterns[p]
	if !ok {
		re = regexp.MustCompile(p)
		patterns[p] = re
	}
	return re
}
