package enrich

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// The answer rules shared by the http and lambda enrichments (SPEC.md §5.2
// and Part A item 6), for a request that carried a batch of N events:
//
//   - An empty answer — no body, `""`, `{}`, `[]` or `null` — means the
//     target is not called: every event of the batch counts as done.
//   - An array answer of M elements replaces the payloads:
//     1. When its elements are objects carrying a "messageId" string, they
//     map by it: each element becomes the new payload of that message
//     (several elements naming one message make several events of it, all
//     of which must succeed). Messages no element names are done, like
//     filtered ones. An element naming a message not in the batch, an
//     empty or non-string messageId, or a mix of elements with and without
//     messageId make the answer malformed: the whole batch fails.
//     2. Otherwise, when M == N, elements map by position.
//     3. Otherwise, when the batch holds one message, all M elements become
//     events of it (fan-out: all must succeed).
//     4. Otherwise (M != N, N > 1, no messageId) the outputs cannot be tied
//     to messages: the enrichment is invoked again once per event, with a
//     batch of one, and rule 3 applies to each answer. No message is lost
//     (each is tied to its own outputs) and no output is delivered twice;
//     the price is N more invocations. Cross-message aggregation therefore
//     needs messageId in the outputs.
//   - Any other JSON answer (an object without batchItemFailures, a string,
//     a number) is an array of one: one output, placed by the rules above.
//   - We go further than Pipes: an object with a "batchItemFailures" key is
//     a partial answer, read by pipe.ParseBatchResponse; the messages it
//     names fail. With an "items" array, the items replace the payloads of
//     the other messages, by messageId or by position (their count must
//     then equal the number of messages not failed; else the answer is
//     malformed); `"items": []` makes them done. Without "items" (or with
//     null), they go on with their payloads unchanged.
//   - An answer that is not JSON is malformed, except for a single event
//     sent on its own by the http enrichment (batch: false), where the
//     body itself is the new payload.
//
// Malformed answers wrap pipe.ErrMalformedAnswer.

// maxAnswer is the largest answer read: Pipes' 6 MB payload limit.
const maxAnswer = 6 << 20

// splitParallel bounds the one-event invocations in flight when an answer
// must be split (rule 4).
const splitParallel = 8

// invokeFunc sends one request body and returns the answer. Its error
// classifies the failure (pipe.Permanent, pipe.Throttled or plain).
//
// first is the first event of the call, which an http enrichment renders
// its dynamic parameters from.
type invokeFunc func(ctx context.Context, first *pipe.Event, body []byte) ([]byte, error)

// mapping is the outcome of reading an answer.
type mapping struct {
	out   []*pipe.Event
	res   pipe.Result
	split bool // rule 4: invoke once per event
}

// readAnswer applies the answer rules to body, the answer for events.
// textOK lets a non-JSON body be the payload of a single event.
func readAnswer(events []*pipe.Event, body []byte, textOK bool) (mapping, error) {
	b := bytes.Trim(body, " \t\r\n")
	if len(b) == 0 {
		return mapping{}, nil
	}
	if !json.Valid(b) {
		if textOK && len(events) == 1 {
			return mapping{out: []*pipe.Event{derive(events[0], body)}}, nil
		}
		return mapping{}, fmt.Errorf("%w: the answer is not valid JSON", partial.ErrMalformedAnswer)
	}
	switch b[0] {
	case 'n': // null
		return mapping{}, nil
	case '"':
		if string(b) == `""` {
			return mapping{}, nil
		}
	case '[':
		var elems []json.RawMessage
		if err := json.Unmarshal(b, &elems); err != nil {
			return mapping{}, fmt.Errorf("%w: %v", partial.ErrMalformedAnswer, err)
		}
		if len(elems) == 0 {
			return mapping{}, nil
		}
		return mapOutputs(events, elems, true)
	case '{':
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(b, &fields); err != nil {
			return mapping{}, fmt.Errorf("%w: %v", partial.ErrMalformedAnswer, err)
		}
		if len(fields) == 0 {
			return mapping{}, nil
		}
		if _, ok := fields["batchItemFailures"]; ok {
			return readPartial(events, b, fields)
		}
	}
	return mapOutputs(events, []json.RawMessage{b}, true)
}

// readPartial reads a batchItemFailures answer.
func readPartial(events []*pipe.Event, body []byte, fields map[string]json.RawMessage) (mapping, error) {
	res, err := partial.ParseBatchResponse(body, inBatch(events))
	if err != nil {
		return mapping{}, err
	}
	failed := make(map[string]bool, len(res.Failures))
	for i, f := range res.Failures {
		failed[f.ID] = true
		res.Failures[i].Err = fmt.Errorf("named in the enrichment's batchItemFailures")
	}
	rest := make([]*pipe.Event, 0, len(events))
	for _, ev := range events {
		if !failed[ev.ID()] {
			rest = append(rest, ev)
		}
	}
	raw, ok := fields["items"]
	if !ok || string(bytes.TrimSpace(raw)) == "null" {
		return mapping{out: rest, res: res}, nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return mapping{}, fmt.Errorf("%w: items is not an array", partial.ErrMalformedAnswer)
	}
	if len(elems) == 0 || len(rest) == 0 {
		if len(elems) > 0 {
			return mapping{}, fmt.Errorf("%w: items given but every message failed", partial.ErrMalformedAnswer)
		}
		return mapping{res: res}, nil
	}
	m, err := mapOutputs(rest, elems, false)
	if err != nil {
		return mapping{}, fmt.Errorf("items: %w", err)
	}
	if m.split {
		return mapping{}, fmt.Errorf("%w: %d items for %d messages not failed, and items carry no messageId",
			partial.ErrMalformedAnswer, len(elems), len(rest))
	}
	m.res = res
	return m, nil
}

// mapOutputs ties output elements to events (rules 1 to 4). canSplit is
// false where rule 4 is not allowed; split is then reported all the same
// and the caller decides.
func mapOutputs(events []*pipe.Event, elems []json.RawMessage, canSplit bool) (mapping, error) {
	ids := make([]string, len(elems))
	withID := 0
	for i, e := range elems {
		id, has, err := messageID(e)
		if err != nil {
			return mapping{}, fmt.Errorf("%w: output %d: %v", partial.ErrMalformedAnswer, i, err)
		}
		if has {
			ids[i] = id
			withID++
		}
	}
	if withID > 0 && withID < len(elems) {
		return mapping{}, fmt.Errorf("%w: %d of %d outputs carry a messageId: give it in all or none", partial.ErrMalformedAnswer, withID, len(elems))
	}
	out := make([]*pipe.Event, 0, len(elems))
	switch {
	case withID > 0:
		first := make(map[string]*pipe.Event, len(events))
		for _, ev := range events {
			if _, ok := first[ev.ID()]; !ok {
				first[ev.ID()] = ev
			}
		}
		for i, e := range elems {
			ev, ok := first[ids[i]]
			if !ok {
				return mapping{}, fmt.Errorf("%w: output %d names messageId %q, which is not in the batch", partial.ErrMalformedAnswer, i, ids[i])
			}
			out = append(out, derive(ev, e))
		}
	case len(elems) == len(events):
		for i, e := range elems {
			out = append(out, derive(events[i], e))
		}
	case oneMessage(events):
		for _, e := range elems {
			out = append(out, derive(events[0], e))
		}
	default:
		return mapping{split: true}, nil
	}
	return mapping{out: out}, nil
}

// messageID reads the "messageId" field of an object element: the key must
// be spelt exactly so (encoding/json matches struct fields regardless of
// case, so the object is read as a map).
func messageID(e json.RawMessage) (id string, has bool, err error) {
	e = bytes.TrimLeft(e, " \t\r\n")
	if len(e) == 0 || e[0] != '{' || !bytes.Contains(e, []byte(`"messageId"`)) {
		return "", false, nil // (a key spelt with escapes is not read as messageId)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e, &fields); err != nil {
		return "", false, err
	}
	raw, ok := fields["messageId"]
	if !ok {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &id); err != nil || id == "" {
		return "", true, errors.New("messageId is not a non-empty string")
	}
	return id, true, nil
}

// oneMessage reports whether all events come from the same message.
func oneMessage(events []*pipe.Event) bool {
	for _, ev := range events[1:] {
		if ev.ID() != events[0].ID() {
			return false
		}
	}
	return len(events) > 0
}

// derive makes the event carrying payload for ev's message, sharing ev's
// decoded body (as filters see it).
func derive(ev *pipe.Event, payload []byte) *pipe.Event {
	next := &pipe.Event{Message: ev.Message, RecordJSON: bytes.Clone(payload)}
	body, isJSON := ev.Body()
	next.SetBody(body, isJSON)
	return next
}

// inBatch reports whether an id names an event of events.
func inBatch(events []*pipe.Event) func(string) bool {
	ids := make(map[string]struct{}, len(events))
	for _, ev := range events {
		ids[ev.ID()] = struct{}{}
	}
	return func(id string) bool {
		_, ok := ids[id]
		return ok
	}
}

// payloads renders what each event sends: the input template's output when
// there is one, else the event's payload (its SQS record). An event whose
// template fails is reported in res and left out of sent.
func payloads(events []*pipe.Event, t *template.Template, vars template.Vars) (sent []*pipe.Event, bodies [][]byte, res pipe.Result) {
	if t == nil {
		bodies = make([][]byte, len(events))
		for i, ev := range events {
			bodies[i] = ev.RecordJSON
		}
		return events, bodies, res
	}
	sent = make([]*pipe.Event, 0, len(events))
	bodies = make([][]byte, 0, len(events))
	for _, ev := range events {
		b, err := t.Render(ev, vars)
		if err != nil {
			res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: fmt.Errorf("rendering the enrichment input template: %w", err)})
			continue
		}
		sent = append(sent, ev)
		bodies = append(bodies, b)
	}
	return sent, bodies, res
}

// jsonArray encodes payloads as one JSON array: a payload that is valid
// JSON goes as is, any other as a JSON string.
func jsonArray(bodies [][]byte) []byte {
	n := 2
	for _, b := range bodies {
		n += len(b) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, b := range bodies {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONValue(out, b)
	}
	return append(out, ']')
}

// appendJSONValue appends p as a JSON value: as is when valid JSON, else as
// a JSON string.
func appendJSONValue(dst, p []byte) []byte {
	if json.Valid(p) {
		return append(dst, bytes.TrimSpace(p)...)
	}
	s, _ := json.Marshal(string(p)) // a string always encodes
	return append(dst, s...)
}

// enrichBatch sends events as one JSON array through invoke and applies the
// answer rules, splitting into one-event batches when rule 4 says so.
func enrichBatch(ctx context.Context, events []*pipe.Event, bodies [][]byte, invoke invokeFunc, onSplit func(n int)) ([]*pipe.Event, pipe.Result, error) {
	answer, err := invoke(ctx, events[0], jsonArray(bodies))
	if err != nil {
		return nil, pipe.Result{}, err
	}
	m, err := readAnswer(events, answer, false)
	if err != nil {
		return nil, pipe.Result{}, err
	}
	if !m.split {
		return m.out, m.res, nil
	}
	if onSplit != nil {
		onSplit(len(events))
	}
	return eachEvent(ctx, events, func(ctx context.Context, i int) (mapping, error) {
		answer, err := invoke(ctx, events[i], jsonArray(bodies[i:i+1]))
		if err != nil {
			return mapping{}, err
		}
		return readAnswer(events[i:i+1], answer, false)
	})
}

// eachEvent runs one call per event, at most splitParallel at once, and
// gathers the outputs in event order. A call's error fails that event's
// message alone; a done ctx fails the whole batch. It returns when every
// call has.
func eachEvent(ctx context.Context, events []*pipe.Event, call func(ctx context.Context, i int) (mapping, error)) ([]*pipe.Event, pipe.Result, error) {
	results := make([]mapping, len(events))
	errs := make([]error, len(events))
	var g errgroup.Group
	g.SetLimit(splitParallel)
	for i := range events {
		g.Go(func() error {
			results[i], errs[i] = call(ctx, i)
			return nil
		})
	}
	_ = g.Wait() // the calls report through errs
	if err := ctx.Err(); err != nil {
		// Cut short (shutdown): fail the batch whole, so that the pipe
		// releases it instead of counting a failure per message.
		return nil, pipe.Result{}, fmt.Errorf("cancelled while enriching %d events one by one: %w", len(events), err)
	}
	var out []*pipe.Event
	var res pipe.Result
	for i, ev := range events {
		if errs[i] != nil {
			res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID(), Err: errs[i]})
			continue
		}
		out = append(out, results[i].out...)
		res.Failures = append(res.Failures, results[i].res.Failures...)
	}
	return out, res, nil
}
