package config

import (
	"strings"
	"testing"
)

// An sqs source's `fifo` says what kind its queue is where the queue comes
// from a variable: `fifo: false` (a standard queue) takes away the warning
// that a batch window is refused if the variable names a FIFO queue, and
// `fifo: true` refuses the batch window at once. Once the queue is known it
// must agree with its name (.fifo or not); under --skip-env a placeholder
// is not judged.
func TestAnSQSSourcesFifoKeySaysWhatKindItsQueueIs(t *testing.T) {
	const standard = "https://sqs.us-east-1.amazonaws.com/123456789012/orders"
	tests := []struct {
		name     string
		source   string
		env      map[string]string
		skipEnv  bool
		wantErr  string // "" for none
		wantWarn bool
	}{
		{"a variable queue and a batch window warn", "queue_url: ${Q}\n  batch_window: 10s", map[string]string{"Q": standard}, false, "", true},
		{"fifo: false says the queue is standard: no warning", "queue_url: ${Q}\n  batch_window: 10s\n  fifo: false", map[string]string{"Q": standard}, false, "", false},
		{"fifo: false and a .fifo queue are refused at the queue", "queue_url: ${Q}\n  fifo: false", map[string]string{"Q": standard + ".fifo"}, false, "source.queue_url: names a FIFO queue (.fifo), but fifo is false", false},
		{"fifo: true and a standard queue name are refused", "queue_name: orders\n  fifo: true", nil, false, "source.queue_name: names a standard queue (no .fifo at the end), but fifo is true", false},
		{"fifo: true refuses a batch window on a variable queue", "queue_arn: ${Q}\n  fifo: true\n  batch_window: 1s", map[string]string{"Q": "arn:aws:sqs:us-east-1:123456789012:orders.fifo"}, false, "source.batch_window: batching window is not supported for FIFO queues", false},
		{"a placeholder is not judged", "queue_url: ${Q}\n  fifo: true", nil, true, "", false},
		{"fifo: true and a .fifo queue agree", "queue_url: " + standard + ".fifo\n  fifo: true", nil, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := Loader{SkipEnv: tt.skipEnv, LookupEnv: func(k string) (string, bool) {
				v, ok := tt.env[k]
				return v, ok
			}}
			rep := l.Report("p.yaml", []byte("name: p\nsource:\n  type: sqs\n  "+tt.source+"\ntarget: {type: stdout}\n"))
			var errs []string
			for _, e := range rep.Errors {
				errs = append(errs, e.Field+": "+e.Msg)
			}
			got := strings.Join(errs, "\n")
			switch {
			case tt.wantErr == "" && got != "":
				t.Errorf("errors:\n%s\nwant none", got)
			case tt.wantErr != "" && !strings.Contains(got, tt.wantErr):
				t.Errorf("errors:\n%s\nwant %s", got, tt.wantErr)
			}
			if warned := len(rep.Warnings) > 0; warned != tt.wantWarn {
				t.Errorf("warnings %v, want a warning: %v", rep.Warnings, tt.wantWarn)
			}
		})
	}
}
