// Package pipe is the pipes runtime: one Pipe polls a source.Source,
// forms batches, filters, enriches, hands each batch to a Target and
// settles every message by its outcome; a Runner runs many pipes. It owns
// the contracts that filters, enrichers and targets implement; the
// contract of a queue (Source, its abilities and the Message it receives)
// is package source, beneath it. It imports none of their
// implementations.
//
// # Embedding: where to start
//
// The examples are the way in; each runs in go test:
//
//   - Example: a pipe in Go, a memory queue (source/memory) as its source
//     and a TargetFunc as its target, reading each body with Event.Body.
//   - Example_itemFailures: what a target's Result does to each item —
//     not named: succeeded; a plain error: retried by the source's rules;
//     Permanent(err): dead-lettered now; ItemFailure.RetryAfter: tried
//     again after that delay.
//   - ExampleRunner: two pipes run together and a graceful stop.
//   - Example_customSource and Example_customTarget: a Source and a Target
//     of your own, each passing its contract suite (source/sourcetest,
//     target/targettest).
//   - In package pipes (the module's root): ExampleRegistry_RegisterFunc
//     and ExampleRegistry_MustRegisterTarget, a pipe from a pipeline file
//     with a target type of your own.
//
// # What is public, and why
//
// An embedder writes a Target (or a TargetFunc), maybe a source.Source,
// and builds pipes with New and Options, running them with Run or a
// Runner. Those contracts, the per-item answer (Result, ItemFailure,
// Fail, Permanent, Throttled, ErrReportedFailed) and what Options takes
// (Filter, Enricher, Transformer, Backoff, Metrics, Tracer) are
// exported, and every type Options names can be built outside the
// module: the in-flight byte budget several pipes share is package budget
// (budget.New), and a Tracer is package tracing's OpenTelemetry Provider
// (tracing.New; the span type it returns is internal, so that provider is
// the one implementation). What only the module's own packages share —
// the error classes the runtime reads and sources' SettleError
// (internal/core), the observer hooks of the status page, its live tail
// (Tap) and the tracing span types (internal/core), the partial batch
// answer parser (internal/kit/partial) — is internal. No internal type
// is aliased here: an alias would show a name whose documentation an
// embedder cannot read (go doc lists no method or field of an alias).
//
// Some of what stays is there for the module's own targets and tools and
// says so in its documentation: Event's payload methods (AppendPayload,
// PayloadLen, PayloadBytes, PayloadIsJSON, VouchJSON) and the
// PayloadAppender ability, which let a target write a record as it sends
// it instead of keeping an encoded copy; Keeper, which holds messages
// that the dead-letter tools receive outside a pipe with a pipe's
// heartbeat; SetObserver and Status, which the status page reads
// (package ui's Recorder is an Observer an embedder can set too). They
// need the runtime's unexported state, so they cannot move out of this
// package without the runtime moving with them.
//
// delivery is not exported. nats.go's jetstream hands each Msg, with its
// verbs, to the consumer, who settles it; here nobody but the pipe
// settles (see "Who settles"), and a target is handed []*Event, so a
// delivery would be a type no user can obtain. A target says what becomes
// of each item in its Result instead: nothing (success), an error (retry
// by the source's rules), Permanent (dead-letter now), or RetryAfter (try
// again after d: on SQS a ChangeMessageVisibility to d, on RabbitMQ its
// delayed retry, on the memory queue a delay). The settler maps these to
// the verbs below, once per message, on every path.
//
// The Source contract and its optional abilities (Opener, Closer,
// Extender, Terminator, Deferrer, HoldLimiter, AckObserver,
// AttemptCounter, CancelSafe, DeferralTeller) are package source, with
// Message and its record encoding: a source author imports source and
// source/sourcetest, a target author pipe, and neither reads the other's
// half. They stay one-method interfaces found by type
// assertion rather than capability fields on source.Info: each is a
// behaviour with its own arguments, a wrapper forwards exactly those it
// implements (embedding a source keeps them all, as Example_customSource
// does), and a source author implements only Receive, Ack and Nak to
// begin with. Capability flags would need function fields beside them
// and could claim an ability the value does not have.
//
// # The path of a message
//
//	schedule ──► a receive, when there is room (scheduler.go) and the
//	      │      receive backoff (recvbackoff.go), the rate limit
//	      │      (limiter.go), the budget (sizeest.go) and the circuit
//	      │      breaker (breaker.go) let it       pipe.go: schedule
//	      ▼
//	Source.Receive ──► delivery (settler.track: leased, heartbeated)
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
//	      │                          pipe (held.go), leased, sent
//	      │                          again                  outage.go
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
// A delivery takes one final verb: a second is refused (errSettled) and
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
// everything unfinished. A source that may keep a message unsettled only
// so long (a HoldLimiter: RabbitMQ's consumer_timeout) has its held
// batches given back before the limit (expireHeld): deferred again, else
// released. A held event honours the retry policy's
// max_event_age when its batch goes again: if that try fails, whole or
// not, it is not retried (retry marks it TooOld) and that is a verdict —
// exhausted, dead-lettered with on_exhausted: dead_letter — not another
// hold. The deferral was chosen over holding for RabbitMQ
// because held deliveries fill the basic.qos window (the broker sends
// nothing else) and age towards consumer_timeout; on SQS and the memory
// queue holding is both simplest and true: a lease extension is no
// receive.
//
// # A poison batch is bisected
//
// A batch that fails whole every time while the target works for other
// batches (a target that answers 500 to a batch holding one record it
// cannot take) is no outage but something in the batch. bisect
// (outage.go) adapts Lambda's BisectBatchOnFunctionError to the rule
// above. While the circuit is closed:
//
//   - a held batch that fails whole again is split in halves, each held
//     as its own batch and sent at once (a split counts nothing; a half
//     that goes through shows whether the target works; a half's own
//     whole failures do not count towards the breaker either, since its
//     sibling's answer may still be on its way: counted, a poison's halves
//     opened the circuit by themselves);
//   - when the target answered a batch that started after this batch's
//     last failure (for a half: after the split; for a RabbitMQ copy:
//     after Defer moved it, DeferralTeller) the failure is in the batch:
//     it is split without counting towards the breaker, and a single
//     message is judged: it fails as a named item failure would (its
//     receive or delivery count used, retried by its queue's rules,
//     dead-lettered by the limit, Term with on_exhausted: dead_letter) and
//     is convicted;
//   - a convicted message (the pipe remembers the last 1024) whose batch
//     fails whole again while the last batches the target answered say it
//     works (no outage batch since) is judged at once, so that it reaches
//     its queue's limit without waiting for other traffic each time.
//
// A real outage (nothing the target answers meanwhile) still counts
// nothing: the halves fail too, each failure counts towards the breaker,
// and the circuit opens. FIFO order holds: a FIFO batch is split between
// its message groups; one of a single group in order — the second half
// waits, held, until the first is done, and fails with it (stage fifo)
// when the first holds a verdict. On RabbitMQ the halves are held by the
// pipe (they go at once); what fails without a sign of a working target is
// deferred as before. A dry run bisects the same way; its verdicts give no
// verb, as any. The price: a target that fails whole for some batches and
// not others (a flapping target) may cost a good message one counted
// receive; and a held poison batch with no other traffic at all says
// nothing of the target: it is retried, and while the circuit is open the
// probes alternate between it and a fresh batch, so that the first other
// message that goes through closes the circuit and lets the bisection
// go on. On a FIFO queue of one message group the poison, once alone,
// blocks its group, so that no other message can show the target works
// until other groups bring traffic: it stays an outage (held, probed,
// nothing lost) meanwhile.
//
// The circuit breaker (breaker.go; the pipe feeds it in tripLocked) opens
// after three outage batches in a row: polling pauses and one probe batch goes to the target at 1 s, 2 s,
// … 60 s — a held batch, or, with nothing held (a Deferrer's source), a
// fresh batch received for it; after a held probe failed, a fresh one when
// the source has one. Only a probe that the target answered
// closes it: a batch that started before it opened and succeeds after
// tells nothing of the target now.
package pipe
