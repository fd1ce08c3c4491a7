package ui

import "github.com/pipesproject/pipes/internal/core"

// State is a pipe's state, decided once from its pipe.Status for the
// status page and for `pipes run`'s /status, which spell it differently
// (String and Code).
type State int

// The states, in the order they are decided: the first that holds wins.
const (
	// Draining: told to stop, it finishes its batches.
	Draining State = iota
	// Starting: its source is not open yet.
	Starting
	// CircuitOpen: the target keeps failing and polling is held; the pipe
	// still counts as ready.
	CircuitOpen
	// NotReady: its receives keep failing (or its source would not open).
	NotReady
	// Paused: polling is paused from the page.
	Paused
	// Running: it polls and delivers.
	Running
)

// StateOf decides a pipe's state from its status.
func StateOf(st core.Status) State {
	switch {
	case st.Stopping:
		return Draining
	case !st.Started && st.Err != nil && !st.Ready:
		return NotReady
	case !st.Started:
		return Starting
	case st.CircuitOpen:
		return CircuitOpen
	case !st.Ready:
		return NotReady
	case st.Paused:
		return Paused
	}
	return Running
}

// String is the state as the status page says it: running, paused,
// draining, starting, circuit open or not ready.
func (s State) String() string {
	switch s {
	case Draining:
		return "draining"
	case Starting:
		return "starting"
	case CircuitOpen:
		return "circuit open"
	case NotReady:
		return "not ready"
	case Paused:
		return "paused"
	}
	return "running"
}

// Code is the state as /status says it: running, paused, draining,
// starting, target_failing (circuit open) or source_failing (not ready).
func (s State) Code() string {
	switch s {
	case CircuitOpen:
		return "target_failing"
	case NotReady:
		return "source_failing"
	}
	return s.String()
}
