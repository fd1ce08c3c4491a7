package ui

import (
	"strings"
	"testing"

	"github.com/pipesproject/pipes/config"
)

// A RabbitMQ pipe has no long poll: its status page shows no wait_time;
// an SQS pipe's shows the default.
func TestTheStatusPageShowsNoWaitTimeForARabbitMQPipe(t *testing.T) {
	tests := []struct {
		name string
		file string
		want bool
	}{
		{"rabbitmq", "name: p\nsource:\n  type: rabbitmq\n  url: amqp://h/\n  queue: q\ntarget:\n  type: stdout\n", false},
		{"sqs", "name: p\nsource:\n  type: sqs\n  queue_url: http://127.0.0.1:1/000000000000/q\n  region: us-east-1\ntarget:\n  type: stdout\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps, err := config.Loader{}.Parse("p.yaml", []byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			has := false
			for _, s := range Settings(ps[0]) {
				if strings.HasSuffix(s.Key, "wait_time") {
					has = true
				}
			}
			if has != tt.want {
				t.Errorf("wait_time shown: %v, want %v", has, tt.want)
			}
		})
	}
}
