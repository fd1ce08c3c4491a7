package pipes_test

import (
	"context"
	"fmt"
	"github.com/pipesproject/pipes/internal/syncbuf"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// The tests of this file prove on fauxqs the consumer-side rules that
// local-aws-sqs gets wrong: FIFO group locking, receive counts that only
// receives raise, visibility changes that are not receives. They run
// through a real pipe built by the registry from a pipeline file.

// buildPipe loads one pipeline from yaml and builds it with reg and env.
func buildPipe(t *testing.T, reg *pipes.Registry, env pipes.Env, yaml string) []*pipe.Pipe {
	t.Helper()
	specs, err := config.Load(writeFile(t, "pipe.yaml", yaml))
	if err != nil {
		t.Fatal(err)
	}
	built, err := reg.Build(context.Background(), specs, env)
	if err != nil {
		t.Fatal(err)
	}
	return built
}

// runUntilDrained runs the pipes with Drain until they stop, failing t
// after timeout.
func runUntilDrained(t *testing.T, timeout time.Duration, built []*pipe.Pipe) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := pipe.NewRunner(built...).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the pipe did not drain within %v", timeout)
	}
}

// sendToGroups sends n messages to each group of the FIFO queue, body
// "<group>-<nn>", in order within each group.
func sendToGroups(t *testing.T, c *sqs.Client, url string, n int, groups ...string) {
	t.Helper()
	for i := range n {
		entries := make([]types.SendMessageBatchRequestEntry, len(groups))
		for j, g := range groups {
			entries[j] = types.SendMessageBatchRequestEntry{
				Id:                     aws.String(strconv.Itoa(j)),
				MessageBody:            aws.String(fmt.Sprintf("%s-%02d", g, i)),
				MessageGroupId:         aws.String(g),
				MessageDeduplicationId: aws.String(fmt.Sprintf("%s-%02d", g, i)),
			}
		}
		out, err := c.SendMessageBatch(t.Context(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Failed) > 0 {
			t.Fatalf("sending to %s: %s", url, aws.ToString(out.Failed[0].Message))
		}
	}
}

// receiveCounts receives every visible message of url once (not deleting
// it) and returns body → ApproximateReceiveCount as the server reports it.
func receiveCounts(t *testing.T, c *sqs.Client, url string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for {
		out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 60,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			return counts
		}
		for _, m := range out.Messages {
			n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
			counts[aws.ToString(m.Body)] = n
		}
	}
}

// fauxqs only: local-aws-sqs does not lock a message group while one of its
// messages is in flight, so there a second batch of a group can be handed
// out and order is lost. On fauxqs a group has one batch in flight, its
// messages reach the target in order, and a failure holds the rest of the
// group back until the failed message comes again (after the visibility
// timeout) and succeeds. (fauxqs hands out at most one message per group
// per receive, so a batch never holds two of one group here: that a
// group's first failure fails the rest of the group in the same batch is
// proven on the memory source, TestFIFOKeepsOrderPerGroupAndOneBatchPerGroupInFlight;
// here the target accepts what follows a failure and the pipe must still
// not let the group's later messages overtake it.)
func TestFIFOGroupsOnFauxqsKeepOneBatchInFlightTheirOrderAndWaitForAFailedMessage(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{FIFO: true, VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 5})
	const perGroup = 12
	groups := []string{"a", "b", "c"}
	sendToGroups(t, client, queueURL, perGroup, groups...)

	var mu sync.Mutex
	inFlight := map[string]bool{}
	accepted := map[string][]string{}
	delivered := map[string]int{}
	var violations []string
	failed := false
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("fifo", pipe.TargetFunc(func(_ context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		batchGroups := map[string]bool{}
		for _, ev := range events {
			g := ev.Message.GroupID()
			if inFlight[g] && !batchGroups[g] {
				violations = append(violations, "group "+g+" has two batches in flight")
			}
			batchGroups[g] = true
			inFlight[g] = true
		}
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		var res pipe.Result
		for _, ev := range events {
			g := ev.Message.GroupID()
			inFlight[g] = false
			delivered[ev.Message.Body]++
			if ev.Message.Body == "b-04" && !failed {
				failed = true
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID()})
				continue
			}
			accepted[g] = append(accepted[g], ev.Message.Body)
		}
		return res, nil
	}))
	built := buildPipe(t, reg, pipes.Env{Drain: true}, fmt.Sprintf(`
name: fifo
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, batch_size: 10}
target: {type: func, func: fifo}
`, queueURL, endpoint))
	runUntilDrained(t, 90*time.Second, built)

	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Errorf("FIFO violations: %v", violations)
	}
	if !failed {
		t.Fatal("the failure was never injected")
	}
	for _, g := range groups {
		var want []string
		for i := range perGroup {
			want = append(want, fmt.Sprintf("%s-%02d", g, i))
		}
		if got := strings.Join(accepted[g], ","); got != strings.Join(want, ",") {
			t.Errorf("group %s accepted %s, want each once, in order: %s", g, got, strings.Join(want, ","))
		}
	}
	if delivered["b-04"] != 2 {
		t.Errorf("b-04 delivered %d times, want 2 (failed once, then accepted)", delivered["b-04"])
	}
	if dead := sqstest.DrainBodies(t, client, dlqURL); len(dead) > 0 {
		t.Errorf("dead-lettered %v, want nothing", dead)
	}
}

// fauxqs only: local-aws-sqs counts every ChangeMessageVisibility as a
// receive, so there the heartbeat itself spends the receive counts and
// dead-letters a slow batch. On fauxqs a batch slower than two visibility
// timeouts, on a queue with maxReceiveCount 2, is delivered once, seen with
// receive count 1 and deleted; a probe message of the same batch that the
// target fails comes back with receive count 2 (the heartbeats spent none)
// and is accepted then, and nothing reaches the dead-letter queue. (On
// local-aws-sqs the probe is dead-lettered.)
func TestHeartbeatOnFauxqsKeepsASlowBatchInvisibleWithoutSpendingReceiveCounts(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 4 * time.Second, MaxReceiveCount: 2})
	var bodies []string
	for i := range 5 {
		bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
	}
	const probe = `{"n":"probe"}`
	sqstest.SendBodies(t, client, queueURL, append(bodies, probe)...)

	var mu sync.Mutex
	delivered := map[string]int{}
	counts := map[string]int{}
	reg := pipes.NewRegistry()
	reg.MustRegisterFunc("slow", pipe.TargetFunc(func(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
		mu.Lock()
		for _, ev := range events {
			delivered[ev.Message.Body]++
			counts[ev.Message.Body] = max(counts[ev.Message.Body], ev.Message.ReceiveCount())
		}
		mu.Unlock()
		select {
		case <-time.After(9 * time.Second): // more than two visibility timeouts
			// (4 s, not less: on a loaded 2-core machine a heartbeat call to
			// the node server took long enough to miss a 2 s timeout)
		case <-ctx.Done():
			return pipe.Result{}, ctx.Err()
		}
		mu.Lock()
		defer mu.Unlock()
		var res pipe.Result
		for _, ev := range events {
			if ev.Message.Body == probe && delivered[probe] == 1 {
				res.Failures = append(res.Failures, pipe.ItemFailure{ID: ev.ID()})
			}
		}
		return res, nil
	}))
	metrics := pipe.NewMetrics(nil)
	built := buildPipe(t, reg, pipes.Env{Drain: true, Metrics: metrics}, fmt.Sprintf(`
name: slow
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s, batch_size: 10, batch_window: 500ms}
target: {type: func, func: slow, timeout: 30s}
`, queueURL, endpoint))
	runUntilDrained(t, 60*time.Second, built)

	mu.Lock()
	defer mu.Unlock()
	for _, b := range bodies {
		if delivered[b] != 1 || counts[b] != 1 {
			t.Errorf("%s delivered %d times with receive count %d, want once with receive count 1", b, delivered[b], counts[b])
		}
	}
	if delivered[probe] != 2 || counts[probe] != 2 {
		t.Errorf("the failed probe was delivered %d times, last with receive count %d; want twice, with 2", delivered[probe], counts[probe])
	}
	if n := testutil.ToFloat64(metrics.APICalls.WithLabelValues("slow", "ChangeMessageVisibilityBatch")); n == 0 {
		t.Error("no ChangeMessageVisibilityBatch call: the heartbeat did not run, the test proves nothing")
	}
	if dead := sqstest.DrainBodies(t, client, dlqURL); len(dead) > 0 {
		t.Errorf("dead-lettered %v, want nothing", dead)
	}
	if visible, inflight := sqstest.Count(t, client, queueURL); visible+inflight != 0 {
		t.Errorf("the queue still has %d visible and %d in-flight messages, want none", visible, inflight)
	}
}

// fauxqs only: this is the bug users hit on local-aws-sqs, where the
// heartbeat and the release at the stop both count as receives, so a dry
// run and Ctrl-C moved a whole queue with maxReceiveCount 2 to its
// dead-letter queue. On fauxqs a dry run that lasts several visibility
// timeouts prints every message, and its stop releases every one, visible
// at once, received only once, nothing dead-lettered.
func TestDryRunOnFauxqsThenStopReleasesEverythingAndDeadLettersNothing(t *testing.T) {
	t.Parallel()
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, sqstest.Fauxqs)
	client := sqstest.ClientOf(t, sqstest.Fauxqs)
	queueURL, dlqURL := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 2})
	var bodies []string
	for i := range 25 {
		bodies = append(bodies, fmt.Sprintf(`{"n":%d}`, i))
	}
	sqstest.SendBodies(t, client, queueURL, bodies...)
	target := newBatchServer(t)
	var out syncBuffer
	built := buildPipe(t, pipes.NewRegistry(), pipes.Env{DryRun: true, Stdout: &out}, fmt.Sprintf(`
name: watch
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target: {type: http, url: %s}
`, queueURL, endpoint, target.URL))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(ctx) }()
	waitFor(t, 30*time.Second, "a dry-run line per message", func() bool { return lineCount(&out) >= len(bodies) })
	time.Sleep(5 * time.Second) // more than two visibility timeouts of heartbeats
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	if delivered, _ := target.counts(); len(delivered) > 0 {
		t.Errorf("the dry run called the target: %v", delivered)
	}
	if dead := sqstest.DrainBodies(t, client, dlqURL); len(dead) > 0 {
		t.Errorf("dead-lettered %d messages, want none", len(dead))
	}
	counts := receiveCounts(t, client, queueURL)
	for _, b := range bodies {
		// One receive by the dry run, one by receiveCounts.
		if n, ok := counts[b]; !ok || n != 2 {
			t.Errorf("%s: visible %v with receive count %d after the stop, want visible with 2", b, ok, n)
		}
	}
}

// syncBuffer is a dry run's output, read while the pipe writes it.
type syncBuffer = syncbuf.Buffer

// lineCount is how many lines b holds.
func lineCount(b *syncBuffer) int {
	return strings.Count(b.String(), "\n")
}
