package filter

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/pipesproject/pipes/pipe"
)

var _ pipe.Filter = (*Expr)(nil)

// Expr is a compiled expr-lang boolean expression over an event's record.
// It is immutable and safe for concurrent use.
type Expr struct {
	program *vm.Program
}

// exprRecord is the typed environment of expressions: the record's fields
// under their JSON names, body decoded when it is valid JSON.
type exprRecord struct {
	MessageID              string                   `expr:"messageId"`
	ReceiptHandle          string                   `expr:"receiptHandle"`
	Body                   any                      `expr:"body"`
	Attributes             map[string]string        `expr:"attributes"`
	MessageAttributes      map[string]exprAttribute `expr:"messageAttributes"`
	MD5OfBody              string                   `expr:"md5OfBody"`
	MD5OfMessageAttributes string                   `expr:"md5OfMessageAttributes"`
	EventSource            string                   `expr:"eventSource"`
	EventSourceARN         string                   `expr:"eventSourceARN"`
	AWSRegion              string                   `expr:"awsRegion"`
	// The Pipes RabbitMQ record's fields (zero for SQS records).
	Data            any            `expr:"data"`
	BasicProperties map[string]any `expr:"basicProperties"`
	Redelivered     bool           `expr:"redelivered"`
	EventSourceKey  string         `expr:"eventSourceKey"`
	EventSourceArn  string         `expr:"eventSourceArn"`
}

// exprAttribute is a message attribute in expressions; binary values are
// base64 text, as in the record's JSON.
type exprAttribute struct {
	StringValue      string   `expr:"stringValue"`
	BinaryValue      string   `expr:"binaryValue"`
	StringListValues []string `expr:"stringListValues"`
	BinaryListValues []string `expr:"binaryListValues"`
	DataType         string   `expr:"dataType"`
}

// CompileExpr compiles a boolean expression once, against the record's
// typed environment: unknown names and non-boolean results are compile
// errors. Only expr's built-in functions are available. An error that expr
// places in the expression wraps a *SyntaxError.
func CompileExpr(src string) (*Expr, error) {
	p, err := expr.Compile(src, expr.Env(&exprRecord{}), expr.AsBool())
	if err != nil {
		return nil, fmt.Errorf("compiling expr expression: %w", exprSyntaxError(src, err))
	}
	return &Expr{program: p}, nil
}

// Match evaluates the expression on the event's record. An error while
// evaluating fails this event alone. It does not block.
func (x *Expr) Match(_ context.Context, ev *pipe.Event) (bool, error) {
	out, err := expr.Run(x.program, exprEnv(ev))
	if err != nil {
		return false, fmt.Errorf("evaluating expr filter on message %s: %w", ev.ID(), err)
	}
	b, _ := out.(bool)
	return b, nil
}

func exprEnv(ev *pipe.Event) *exprRecord {
	m := ev.Message
	body, _ := ev.Body()
	if m.Record != nil {
		v := RecordValue(ev)
		r := &exprRecord{MessageID: m.MessageID, Data: v[m.Record.BodyField], Attributes: map[string]string{}}
		r.BasicProperties, _ = v["basicProperties"].(map[string]any)
		r.Redelivered, _ = v["redelivered"].(bool)
		r.EventSource, _ = v["eventSource"].(string)
		r.EventSourceKey, _ = v["eventSourceKey"].(string)
		r.EventSourceArn, _ = v["eventSourceArn"].(string)
		return r
	}
	r := &exprRecord{
		MessageID: m.MessageID, ReceiptHandle: m.ReceiptHandle, Body: body,
		Attributes: m.Attributes, MD5OfBody: m.MD5OfBody,
		MD5OfMessageAttributes: m.MD5OfMessageAttributes, EventSource: m.EventSource,
		EventSourceARN: m.EventSourceARN, AWSRegion: m.AWSRegion,
	}
	if r.Attributes == nil {
		r.Attributes = map[string]string{}
	}
	r.MessageAttributes = make(map[string]exprAttribute, len(m.MessageAttributes))
	for name, a := range m.MessageAttributes {
		xa := exprAttribute{StringListValues: a.StringListValues, DataType: a.DataType}
		if a.StringValue != nil {
			xa.StringValue = *a.StringValue
		}
		if len(a.BinaryValue) > 0 {
			xa.BinaryValue = base64.StdEncoding.EncodeToString(a.BinaryValue)
		}
		for _, b := range a.BinaryListValues {
			xa.BinaryListValues = append(xa.BinaryListValues, base64.StdEncoding.EncodeToString(b))
		}
		r.MessageAttributes[name] = xa
	}
	return r
}

// exprSyntaxError places expr's compile error (its Location counts
// characters) at a byte offset of the expression.
func exprSyntaxError(src string, err error) error {
	var fe *file.Error
	if !errors.As(err, &fe) || fe.From < 0 {
		return err
	}
	off, n := len(src), 0
	for i := range src {
		if n == fe.From {
			off = i
			break
		}
		n++
	}
	return newSyntaxError(src, off, err)
}
