package ui

import (
	"errors"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/core"
)

// BenchmarkRecorder is what a pipe pays per call into its Recorder, on
// the pipe's goroutines (atomics for the counts; a lock and a ring slot
// for a failure).
func BenchmarkRecorder(b *testing.B) {
	r := NewRecorder(5*time.Second, nil)
	sent := time.Now().Add(-time.Second)
	b.Run("Received", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Received(10, sent)
		}
	})
	b.Run("Settled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Settled(9, 1)
		}
	})
	err := errors.New("refused")
	b.Run("Failed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Failed(core.Failure{MessageID: "m", Stage: "target", Err: err, Attempts: 1, At: sent})
		}
	})
	long := errors.New("delivering 10 events to https://api.example.com/v1/orders/8812: HTTP 503 after 1532ms (message 7ad8e341-0842-4077-a7ac-e30ac15c6894)")
	b.Run("Failed/a long error to group", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.Failed(core.Failure{MessageID: "m", Stage: "target", Err: long, Attempts: 1, At: sent})
		}
	})
	b.Run("Sample", func(b *testing.B) {
		b.ReportAllocs()
		now := time.Now()
		for b.Loop() {
			now = now.Add(5 * time.Second)
			r.Sample(now)
		}
	})
}

// BenchmarkNormalizeError is the grouping's cost per failure.
func BenchmarkNormalizeError(b *testing.B) {
	msg := "delivering 10 events to https://api.example.com/v1/orders/8812: HTTP 503 after 1532ms (message 7ad8e341-0842-4077-a7ac-e30ac15c6894)"
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		NormalizeError(msg)
	}
}
