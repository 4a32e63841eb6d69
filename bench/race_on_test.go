//go:build race

package bench

// raceEnabled: the race detector slows every request and record, so timing
// tests skip.
const raceEnabled = true
