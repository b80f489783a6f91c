//go:build !race

package agent_test

// raceDetector says the test binary runs under the race detector.
const raceDetector = false
