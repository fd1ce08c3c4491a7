// Package pipe is the pipes runtime: one Pipe polls a Source, forms
// batches, filters, enriches, hands each batch to a Target and settles every
// message by its outcome; a Runner runs many pipes. It owns the contracts
// that sources, filters, enrichers and targets implement, and imports none
// of them.
//
// # The path of a message
//
//	Source.Receive ──► Delivery (settler.track: leased, heartbeated)
//	      │                 pipe.go: receive
//	      ▼
//	batcher.add ──► batch (size, window, 6 MB of record JSON;
//	      │          FIFO: one batch per group in flight)   batcher.go
//	      ▼
//	runBatch: Filter ─► Enricher ─► Transformer ─► Target.Deliver
//	      │   (a verdict per message: succeeded, filtered, failed, released)
//	      │                                                 batch.go: process
//	      ▼
//	settleBatch: verdict ─► final verb                     batch.go
//	      │   succeeded, filtered ─► Ack
//	      │   released (stop)     ─► Nak
//	      │   failed              ─► Term (dead-letterable) │ NakWithDelay
//	      │                          (retry_backoff) │ retry at lease end
//	      ▼
//	settler ─► Source.Ack / Nak / Extender.Extend / Terminator.Term,
//	           or the dead_letter target then Ack          settler.go
//
// # Who settles
//
// The settler (settler.go) is the one place a message is settled: every
// call to a source's Ack, Nak, Extend or Term is made there, by a fixed set
// of workers, each call with a deadline. settleBatch (batch.go) is the one
// place a verdict becomes a verb; the FIFO hold-back, the messages received
// while stopping and the stop's final release (Pipe.Run) hand their
// deliveries to the same settler. Plugins — filters, enrichers, targets,
// the retry wrapper — return results and errors; they never settle.
//
// A Delivery takes one final verb: a second is refused (ErrSettled) and
// counted. An extension under way and the final verb of the same delivery
// never overlap: the verb waits for the extension to return, and nothing
// is extended after its verb. While a target is down (three batches in a
// row failing whole with retryable errors) the circuit breaker holds the
// failed batches unsettled — invisible, no receive spent — and probes.
package pipe
