// Package filter decides which events go on through a pipe: EventBridge
// event patterns (the full event-bus grammar, matched on the SQS record as
// EventBridge Pipes does), jq programs (gojq) and expr-lang expressions.
// Everything is compiled once when a pipe is loaded; invalid filters are
// rejected then, never while matching. All filters are safe for concurrent
// use and share the event's decoded body (pipe.Event.Body), so a record's
// JSON is parsed at most once.
package filter

import (
	"context"
	"errors"
	"fmt"

	"github.com/pipesproject/pipes/pipe"
)

// Spec is what a pipe's `filter:` block asks for; every part present must
// pass.
type Spec struct {
	// Patterns are EventBridge event patterns as JSON text, OR-ed, at most
	// MaxPatterns.
	Patterns []string
	// JQ is a jq program; it passes when its first output is true.
	JQ string
	// Expr is an expr-lang boolean expression.
	Expr string
}

// New compiles the parts of spec into one filter that passes an event when
// every part present passes, trying the cheapest first (patterns, then
// expr, then jq). It returns a nil filter and no error when spec is empty.
// Errors name the part that is wrong: "patterns[1]: …", "jq: …", "expr: …".
//
// The filter is meant to be the first stage that reads an event's body:
// when a part needs the body, it decodes it with DecodeBody (faster than
// encoding/json, same values) and hands it to the event with SetBody, so
// that every later stage shares it. If the body had already been decoded,
// that decode is wasted but harmless.
func New(spec Spec) (pipe.Filter, error) {
	var parts []pipe.Filter
	readsBody, decodesItself := false, false
	if len(spec.Patterns) > 0 {
		ps, err := CompilePatterns(spec.Patterns)
		if err != nil {
			var pe *PatternError
			if errors.As(err, &pe) {
				return nil, err // already says "patterns[i]: …"
			}
			return nil, fmt.Errorf("patterns: %w", err)
		}
		parts = append(parts, ps)
		readsBody, decodesItself = ps.readsBody, ps.numberText
	}
	if spec.Expr != "" {
		x, err := CompileExpr(spec.Expr)
		if err != nil {
			return nil, fmt.Errorf("expr: %w", err)
		}
		parts = append(parts, x)
		readsBody = true
	}
	if spec.JQ != "" {
		j, err := CompileJQ(spec.JQ)
		if err != nil {
			return nil, fmt.Errorf("jq: %w", err)
		}
		parts = append(parts, j)
		readsBody = true
	}
	if len(parts) == 0 {
		return nil, nil
	}
	return &combined{parts: parts, decode: readsBody && !decodesItself}, nil
}

var _ pipe.Filter = (*combined)(nil)

// combined passes an event when every part passes it, in order.
type combined struct {
	parts  []pipe.Filter
	decode bool // decode the body with DecodeBody first
}

func (c *combined) Match(ctx context.Context, ev *pipe.Event) (bool, error) {
	if c.decode {
		ev.SetBody(DecodeBody(ev.Message.Body))
	}
	for _, f := range c.parts {
		ok, err := f.Match(ctx, ev)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}
