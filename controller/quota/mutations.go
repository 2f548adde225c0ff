package quota

import "time"

// mutations each switch off one rule the guarantees rest on. They exist so that a test can
// prove the deterministic simulation (test/quotasim) catches the rule's absence: a
// simulation that cannot fail where it matters proves nothing. The product never sets them;
// only the quota package's own tests do (export_test.go).
var mutations struct {
	// neverForget: a refused use stays ruled out for ever.
	neverForget bool
	// sureBesideProbe: sure launches fly beside a probe awaiting its verdict.
	sureBesideProbe bool
	// ignoreConfigured: the configured limit is not read.
	ignoreConfigured bool
	// leakTTL, when set, replaces the leak lifetime the tracker assumes.
	leakTTL time.Duration
}

func leakLifetime() time.Duration {
	if mutations.leakTTL > 0 {
		return mutations.leakTTL
	}
	return leakTTL
}

func refusalMemory() time.Duration {
	if mutations.neverForget {
		return 1000 * time.Hour
	}
	return refusalTTL
}
