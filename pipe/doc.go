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
//	      │   outage              ─► Defer (a Deferrer source) │ held by the
//	      │                          pipe, leased, sent again   outage.go
//	      │   failed              ─► Term (dead-letterable) │ NakWithDelay
//	      │                          (retry_backoff) │ retry at lease end
//	      ▼
//	settler ─► Source.Ack / Nak / Extender.Extend / Terminator.Term /
//	           Deferrer.Defer, or the dead_letter target then Ack
//	                                                       settler.go
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
// is extended after its verb.
//
// # An outage is no verdict
//
// Only what is said of a message counts against it: an item the target
// names as failed, a client error (Permanent), a filter, template or
// enrichment error on that message. A message whose target (or enrichment)
// call failed whole with a retryable error — connection refused, timeouts,
// 5xx, 429, or the retry wrapper's exhausted whole-call failure, which it
// marks BatchFailure — is an outage (outageOf): it says nothing of the
// message, so it must neither be dead-lettered nor use up a receive or
// delivery count. settleBatch therefore gives it no failure verb, from the
// first such batch on, whether the circuit is open or not, and for the
// batches in flight when it opens:
//
//   - a source that is a Deferrer (RabbitMQ), not FIFO, not a dry run, is
//     asked to give the messages back uncounted after a delay (verbDefer):
//     about 1 s while the circuit is closed, else until the next probe.
//     What it could not defer comes back to the pipe (settler.onKept),
//     which holds it as below;
//   - otherwise the pipe holds them (heldBatch): unsettled, so the
//     heartbeat extends their leases (SQS: no new receive, no receive
//     count), and sends them again as one batch after about 1 s, 2 s, …
//     60 s by its whole failures in a row. A FIFO group with a held message
//     stays busy: nothing of it overtakes. Held messages count against the
//     room of the receives, so holding never grows memory past the
//     concurrency's worth.
//
// A stop gives held batches back (Nak, no delay), as it releases
// everything unfinished. The deferral was chosen over holding for RabbitMQ
// because held deliveries fill the basic.qos window (the broker sends
// nothing else) and age towards consumer_timeout; on SQS and the memory
// queue holding is both simplest and true: a lease extension is no
// receive. The price of the rule: a batch that fails whole every time
// while the target works for other batches (a target that answers 500 to
// one poison record) is retried for as long, never dead-lettered.
//
// The circuit breaker (tripLocked) opens after three outage batches in a
// row: polling pauses and one probe batch goes to the target at 1 s, 2 s,
// … 60 s — a held batch, or, with nothing held (a Deferrer's source), a
// fresh batch received for it. Only a probe that the target answered
// closes it: a batch that started before it opened and succeeds after
// tells nothing of the target now.
package pipe
