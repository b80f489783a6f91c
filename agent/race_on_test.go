//go:build race

package agent_test

// raceDetector says the test binary, and so each agent process a test starts
// from it, runs under the race detector, whose shadow memory inflates RSS.
const raceDetector = true
