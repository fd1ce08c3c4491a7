package rabbitmq

import (
	"testing"
	"time"
)

func TestAHoldIsCappedAtTheConsumerTimeoutLessTheDeliverysAge(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		timeout time.Duration // the queue's; 0: the default 30 min
		age     time.Duration
		want    time.Duration
	}{
		{"a fresh delivery under the default 30 min: less a minute", 0, 0, 29 * time.Minute},
		{"a delivery 10 min old: from its receipt, not the hold's start", 0, 10 * time.Minute, 19 * time.Minute},
		{"the queue's own x-consumer-timeout of 5 min: less a tenth", 5 * time.Minute, time.Minute, 3*time.Minute + 30*time.Second},
		{"a delivery older than the timeout: no hold at all", 0, 40 * time.Minute, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Config{URL: "amqp://u:p@h:5672/", Queue: "q"})
			if err != nil {
				t.Fatal(err)
			}
			s.opened.Store(&queueInfo{facts: queueFacts{ConsumerTimeout: tt.timeout}})
			if got := s.holdCap(&entry{received: now.Add(-tt.age)}, now); got != tt.want {
				t.Errorf("holdCap %s, want %s", got, tt.want)
			}
		})
	}
}

func TestParseFactsReadsTheQueuesConsumerTimeout(t *testing.T) {
	f, err := parseFacts([]byte(`{"type":"classic","arguments":{},"effective_policy_definition":{"consumer-timeout":60000}}`))
	if err != nil || f.ConsumerTimeout != time.Minute {
		t.Fatalf("ConsumerTimeout %s, %v; want 1m", f.ConsumerTimeout, err)
	}
}
