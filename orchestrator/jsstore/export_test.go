package jsstore

import "time"

// SetNoRespondersFor sets how long a write no server answers for is tried again, until the test ends.
func SetNoRespondersFor(t interface{ Cleanup(func()) }, d time.Duration) {
	old := noRespondersFor
	noRespondersFor = d
	t.Cleanup(func() { noRespondersFor = old })
}
