package keyerr

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// redacted hides its cause's text, as httpcore.Secrets.Error does.
type redacted struct{ cause error }

func (r redacted) Error() string { return "calling [redacted]:\nsecond line" }
func (r redacted) Unwrap() error { return r.cause }

func TestSplit(t *testing.T) {
	base := errors.New("timeout -1s is negative")
	for _, tc := range []struct {
		name string
		err  error
		want []Problem
	}{
		{"nil gives no problem", nil, nil},
		{"a plain error is one problem of the block", base, []Problem{{"", "timeout -1s is negative"}}},
		{"a marked error names its key", New("partition_key", base), []Problem{{"partition_key", "timeout -1s is negative"}}},
		{
			"joined errors under a wrapper are one problem each, the wrapper's text dropped for a marked one",
			fmt.Errorf("configuring the Kinesis target s: %w", errors.Join(
				New("stream", errors.New(`stream "x" is bad`)),
				base,
				New("partition_key", errors.New("partition key is required")),
			)),
			[]Problem{
				{"stream", `stream "x" is bad`},
				{"", "configuring the Kinesis target s: timeout -1s is negative"},
				{"partition_key", "partition key is required"},
			},
		},
		{
			"a wrapper inside a marked error keeps its text",
			New("headers.X-Id", fmt.Errorf("header %q: %w", "X-Id", base)),
			[]Problem{{"headers.X-Id", `header "X-Id": timeout -1s is negative`}},
		},
		{
			"a marked error holding joined ones gives each the key",
			New("url", errors.Join(errors.New("a"), errors.New("b"))),
			[]Problem{{"url", "a"}, {"url", "b"}},
		},
		{
			"a wrapper whose text is not its cause's is a leaf, split by line",
			redacted{cause: New("url", errors.New("calling https://user:pw@x"))},
			[]Problem{{"", "calling [redacted]:"}, {"", "second line"}},
		},
		{"the text above a marked error is dropped", fmt.Errorf("x: %w", New("k", base)), []Problem{{"k", "timeout -1s is negative"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Split(tc.err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Split:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestErrorKeepsTheMessageAndTheCause(t *testing.T) {
	base := errors.New("bad")
	err := New("timestamp", base)
	if err.Error() != "bad" || !errors.Is(err, base) {
		t.Errorf("New(timestamp, bad) = %q, Is(base) = %v; want the text bad and the cause", err, errors.Is(err, base))
	}
	if New("k", nil) != nil {
		t.Error("New of nil is not nil")
	}
}
