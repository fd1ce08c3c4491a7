//go:build race

package pipe_test

// raceEnabled is true when the tests run under the race detector, which
// makes every channel, lock and goroutine operation many times slower.
const raceEnabled = true
