package sqs

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/source"
)

// fakeSQS is a fake of exactly the sqsAPI interface the source declares,
// for the paths the test server cannot produce: entries failing without
// the sender's fault, and whole calls failing. answer decides each
// DeleteMessageBatch / ChangeMessageVisibilityBatch call from the receipt
// handles it carries (keyed by entry id) and the call's number (from 1).
type fakeSQS struct {
	receiveErr error // what ReceiveMessage fails with
	answer     func(call int, handles map[string]string) (failed []types.BatchResultErrorEntry, err error)

	mu         sync.Mutex
	calls      [][]string // the receipt handles of each call
	visibility []int32    // the visibility timeouts of the entries sent
}

func (f *fakeSQS) batch(handles map[string]string) ([]types.BatchResultErrorEntry, []string, error) {
	f.mu.Lock()
	var sent []string
	for _, h := range handles {
		sent = append(sent, h)
	}
	f.calls = append(f.calls, sent)
	n := len(f.calls)
	f.mu.Unlock()
	failed, err := f.answer(n, handles)
	if err != nil {
		return nil, nil, err
	}
	var ok []string
	for id := range handles {
		if !failedID(failed, id) {
			ok = append(ok, id)
		}
	}
	return failed, ok, nil
}

func failedID(failed []types.BatchResultErrorEntry, id string) bool {
	for _, f := range failed {
		if aws.ToString(f.Id) == id {
			return true
		}
	}
	return false
}

func (f *fakeSQS) GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return nil, errors.New("fakeSQS: GetQueueUrl not expected")
}

func (f *fakeSQS) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"QueueArn": "arn:aws:sqs:eu-west-1:123456789012:orders", "VisibilityTimeout": "30",
		"RedrivePolicy": `{"deadLetterTargetArn":"arn:aws:sqs:eu-west-1:123456789012:orders-dlq","maxReceiveCount":"5"}`,
	}}, nil
}

func (f *fakeSQS) ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	return nil, f.receiveErr
}

func (f *fakeSQS) DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	handles := map[string]string{}
	for _, e := range in.Entries {
		handles[aws.ToString(e.Id)] = aws.ToString(e.ReceiptHandle)
	}
	failed, ok, err := f.batch(handles)
	if err != nil {
		return nil, err
	}
	out := &sqs.DeleteMessageBatchOutput{Failed: failed}
	for _, id := range ok {
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: aws.String(id)})
	}
	return out, nil
}

func (f *fakeSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	handles := map[string]string{}
	for _, e := range in.Entries {
		handles[aws.ToString(e.Id)] = aws.ToString(e.ReceiptHandle)
		f.mu.Lock()
		f.visibility = append(f.visibility, e.VisibilityTimeout)
		f.mu.Unlock()
	}
	failed, ok, err := f.batch(handles)
	if err != nil {
		return nil, err
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{Failed: failed}
	for _, id := range ok {
		out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: aws.String(id)})
	}
	return out, nil
}

// failHandle answers a failed entry for every id whose handle is h.
func failHandle(handles map[string]string, h, code string, senderFault bool) []types.BatchResultErrorEntry {
	var out []types.BatchResultErrorEntry
	for id, got := range handles {
		if got == h {
			out = append(out, types.BatchResultErrorEntry{Id: aws.String(id), Code: aws.String(code), Message: aws.String(code + " for " + h), SenderFault: senderFault})
		}
	}
	return out
}

func fakeMessages(n int) []*source.Message {
	msgs := make([]*source.Message, n)
	for i := range msgs {
		msgs[i] = &source.Message{MessageID: "m" + strconv.Itoa(i), ReceiptHandle: "h" + strconv.Itoa(i)}
	}
	return msgs
}

func openFake(t *testing.T, f *fakeSQS) *Source {
	t.Helper()
	src := newSource(Config{QueueName: "orders"}, f, "eu-west-1")
	src.backoffBase = time.Millisecond
	if _, err := src.Open(t.Context()); err == nil {
		t.Fatalf("Open by name with the fake succeeded, want the fake's GetQueueUrl error")
	}
	src = newSource(Config{QueueURL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders"}, f, "eu-west-1")
	src.backoffBase = time.Millisecond
	if _, err := src.Open(t.Context()); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return src
}

func TestSettleRetriesOnlyTheEntriesThatFailedWithoutSenderFault(t *testing.T) {
	t.Parallel()
	internal := errors.New("InternalError")
	throttled := &smithy.GenericAPIError{Code: "RequestThrottled", Message: "slow down"}
	tests := []struct {
		name         string
		msgs         int
		answer       func(call int, handles map[string]string) ([]types.BatchResultErrorEntry, error)
		wantCalls    int
		wantFailed   []string
		senderFault  bool
		wantLastCall []string // handles of the last call, in any order
	}{
		{
			name: "an entry failing once is retried alone and then settled",
			msgs: 3,
			answer: func(call int, h map[string]string) ([]types.BatchResultErrorEntry, error) {
				if call == 1 {
					return failHandle(h, "h1", "InternalError", false), nil
				}
				return nil, nil
			},
			wantCalls: 2, wantLastCall: []string{"h1"},
		},
		{
			name: "an entry failing every time is reported after five attempts",
			msgs: 2,
			answer: func(call int, h map[string]string) ([]types.BatchResultErrorEntry, error) {
				return failHandle(h, "h0", "InternalError", false), nil
			},
			wantCalls: 5, wantFailed: []string{"m0"}, wantLastCall: []string{"h0"},
		},
		{
			name: "a sender fault is reported at once and not retried",
			msgs: 2,
			answer: func(call int, h map[string]string) ([]types.BatchResultErrorEntry, error) {
				return failHandle(h, "h1", "ReceiptHandleIsInvalid", true), nil
			},
			wantCalls: 1, wantFailed: []string{"m1"}, senderFault: true,
		},
		{
			name: "a failed call is retried whole",
			msgs: 2,
			answer: func(call int, h map[string]string) ([]types.BatchResultErrorEntry, error) {
				if call < 3 {
					return nil, internal
				}
				return nil, nil
			},
			wantCalls: 3, wantLastCall: []string{"h0", "h1"},
		},
		{
			name: "a throttled call is retried",
			msgs: 1,
			answer: func(call int, h map[string]string) ([]types.BatchResultErrorEntry, error) {
				if call == 1 {
					return nil, throttled
				}
				return nil, nil
			},
			wantCalls: 2,
		},
		{
			name: "a missing queue is not retried and counts as the sender's fault",
			msgs: 2,
			answer: func(call int, h map[string]string) ([]types.BatchResultErrorEntry, error) {
				return nil, &types.QueueDoesNotExist{Message: aws.String("gone")}
			},
			wantCalls: 1, wantFailed: []string{"m0", "m1"}, senderFault: true,
		},
		{
			name: "twenty-five messages go in three calls with the retried entry of one",
			msgs: 25,
			answer: func(call int, h map[string]string) ([]types.BatchResultErrorEntry, error) {
				return failHandle(h, "h24", "InternalError", false), nil
			},
			wantCalls: 3 + 4, wantFailed: []string{"m24"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, op := range []string{opDelete, opVisibility} {
				f := &fakeSQS{answer: tt.answer}
				src := openFake(t, f)
				msgs := fakeMessages(tt.msgs)
				var err error
				if op == opDelete {
					err = src.Delete(t.Context(), msgs)
				} else {
					err = src.ChangeVisibility(t.Context(), msgs, time.Minute)
				}
				if len(f.calls) != tt.wantCalls {
					t.Errorf("%s: %d calls, want %d: %v", op, len(f.calls), tt.wantCalls, f.calls)
				}
				if tt.wantLastCall != nil && !sameSet(f.calls[len(f.calls)-1], tt.wantLastCall) {
					t.Errorf("%s: last call carried %v, want %v", op, f.calls[len(f.calls)-1], tt.wantLastCall)
				}
				if tt.wantFailed == nil {
					if err != nil {
						t.Errorf("%s: error %v, want none", op, err)
					}
					continue
				}
				var serr *core.SettleError
				if !errors.As(err, &serr) {
					t.Fatalf("%s: error %v, want a *pipe.SettleError", op, err)
				}
				var failed []string
				for h := range serr.Failed { // keyed by receipt handle: h<i> is m<i>'s
					failed = append(failed, "m"+strings.TrimPrefix(h, "h"))
				}
				if !sameSet(failed, tt.wantFailed) || serr.SenderFault != tt.senderFault || serr.Op != op {
					t.Errorf("%s: SettleError = %+v, want op %q, failed %v, sender fault %v", op, serr, op, tt.wantFailed, tt.senderFault)
				}
			}
		})
	}
}

func TestSettleGivesUpWhenTheContextIsCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	f := &fakeSQS{answer: func(call int, h map[string]string) ([]types.BatchResultErrorEntry, error) {
		cancel()
		return failHandle(h, "h0", "InternalError", false), nil
	}}
	src := openFake(t, f)
	err := src.Delete(ctx, fakeMessages(3))
	var serr *core.SettleError
	if !errors.As(err, &serr) || len(serr.Failed) != 1 || !errors.Is(serr.Failed["h0"], context.Canceled) {
		t.Fatalf("Delete = %v, want a SettleError for m0 saying the context was cancelled", err)
	}
	if len(f.calls) != 1 {
		t.Errorf("%d calls after cancellation, want 1", len(f.calls))
	}
}

func TestChangeVisibilityClampsToWholeSecondsWithinTwelveHours(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		d    time.Duration
		want int32
	}{
		{"zero releases", 0, 0},
		{"a negative duration releases", -time.Second, 0},
		{"a fraction of a second rounds up", 1500 * time.Millisecond, 2},
		{"more than twelve hours is cut to twelve", 13 * time.Hour, 43200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeSQS{answer: func(int, map[string]string) ([]types.BatchResultErrorEntry, error) { return nil, nil }}
			src := openFake(t, f)
			if err := src.ChangeVisibility(t.Context(), fakeMessages(1), tt.d); err != nil {
				t.Fatalf("ChangeVisibility: %v", err)
			}
			if len(f.visibility) != 1 || f.visibility[0] != tt.want {
				t.Errorf("sent visibility timeouts %v, want [%d]", f.visibility, tt.want)
			}
		})
	}
}

func TestReceiveMarksThrottlingAndMissingQueues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		err                  error
		throttled, permanent bool
	}{
		{"a throttled receive is marked Throttled", &types.RequestThrottled{Message: aws.String("slow down")}, true, false},
		{"a receive from a deleted queue is Permanent", &types.QueueDoesNotExist{Message: aws.String("gone")}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := openFake(t, &fakeSQS{receiveErr: tt.err})
			msgs, err := src.Receive(t.Context(), 10)
			if msgs != nil || !errors.Is(err, tt.err) || core.IsThrottled(err) != tt.throttled || core.IsPermanent(err) != tt.permanent {
				t.Errorf("Receive = %v, %v; want the error marked throttled %v, permanent %v", msgs, err, tt.throttled, tt.permanent)
			}
		})
	}
}

func TestSettlingNothingCallsNothing(t *testing.T) {
	t.Parallel()
	f := &fakeSQS{answer: func(int, map[string]string) ([]types.BatchResultErrorEntry, error) { return nil, nil }}
	src := openFake(t, f)
	if err := src.Delete(t.Context(), nil); err != nil || len(f.calls) != 0 {
		t.Fatalf("Delete(nil) = %v with %d calls, want nil and none", err, len(f.calls))
	}
}

func TestClassifyMarksThrottlingAndPermanentErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		err                  error
		throttled, permanent bool
	}{
		{"RequestThrottled is throttling", &types.RequestThrottled{Message: aws.String("x")}, true, false},
		{"a generic Throttling code is throttling", &smithy.GenericAPIError{Code: "ThrottlingException"}, true, false},
		{"access denied is permanent", &smithy.GenericAPIError{Code: "AccessDenied"}, false, true},
		{"a missing queue is permanent", &types.QueueDoesNotExist{}, false, true},
		{"an internal error is neither", &smithy.GenericAPIError{Code: "InternalError"}, false, false},
		{"a network error is neither", errors.New("connection reset"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := classify(tt.err)
			if core.IsThrottled(err) != tt.throttled || core.IsPermanent(err) != tt.permanent {
				t.Errorf("classify(%v): throttled %v permanent %v, want %v %v", tt.err, core.IsThrottled(err), core.IsPermanent(err), tt.throttled, tt.permanent)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("classify(%v) does not wrap the error", tt.err)
			}
		})
	}
}

func TestOpenWithTheFakeReadsAStringMaxReceiveCount(t *testing.T) {
	t.Parallel()
	src := openFake(t, &fakeSQS{})
	q, _ := src.opened()
	want := source.Info{ARN: "arn:aws:sqs:eu-west-1:123456789012:orders", VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 5, DeadLetterARN: "arn:aws:sqs:eu-west-1:123456789012:orders-dlq"}
	if q.info != want || q.region != "eu-west-1" {
		t.Errorf("opened %+v in %s, want %+v in eu-west-1", q.info, q.region, want)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, s := range a {
		seen[s]++
	}
	for _, s := range b {
		seen[s]--
	}
	for _, n := range seen {
		if n != 0 {
			return false
		}
	}
	return true
}
