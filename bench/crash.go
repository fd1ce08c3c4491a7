package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// crashOptions are the flags of the crash scenario (issue 20: duplicates
// after a crash).
type crashOptions struct {
	n          int
	kills      int
	seed       uint64
	failShare  float64
	visibility time.Duration
	maxReceive int
	conc       int
	initConc   int
	size       int
	delay      time.Duration
	// bins are pipes binaries to compare, comma-separated ("" or "pipes":
	// the one the harness built from this tree).
	bins string
}

// register adds the crash scenario's flags to fs.
func (o *crashOptions) register(fs *flag.FlagSet) {
	fs.IntVar(&o.n, "crash-n", 10000, "messages of the crash scenario")
	fs.IntVar(&o.kills, "crash-kills", 20, "SIGKILLs of pipes during the crash scenario (each followed by a restart)")
	fs.Uint64Var(&o.seed, "crash-seed", 1, "seed of the crash scenario: which messages fail and when pipes is killed")
	fs.Float64Var(&o.failShare, "crash-fail", 0.1, "share of the crash scenario's messages the target always fails (they end in the DLQ by the redrive policy)")
	fs.DurationVar(&o.visibility, "crash-visibility", 3*time.Second, "visibility timeout of the crash scenario's queue (whole seconds)")
	fs.IntVar(&o.maxReceive, "crash-max-receive", 5, "maxReceiveCount of the crash scenario's redrive policy")
	fs.IntVar(&o.conc, "crash-concurrency", 16, "max_concurrency of pipes in the crash scenario")
	fs.IntVar(&o.initConc, "crash-initial", 0, "initial_concurrency of pipes in the crash scenario (0: the max_concurrency)")
	fs.IntVar(&o.size, "crash-size", 200, "message body size of the crash scenario")
	fs.DurationVar(&o.delay, "crash-target-delay", 0, "answer delay of the crash scenario's target")
	fs.StringVar(&o.bins, "crash-bins", "", "pipes binaries the crash scenario runs one after the other with the same seed, comma-separated (default: the one built from this tree), e.g. /tmp/pipes-old,/tmp/pipes-new")
}

// CrashResult is one binary's run of the crash scenario: n messages, a
// share failing at the target (partial batch answers) until the queue's
// redrive policy dead-letters them, and pipes SIGKILLed and restarted
// kills times at seeded instants.
type CrashResult struct {
	Binary      string  `json:"binary"`
	Seed        uint64  `json:"seed"`
	Messages    int     `json:"messages"`
	Good        int     `json:"good"`
	Failing     int     `json:"failing"`
	Kills       int     `json:"kills"`
	Visibility  string  `json:"visibility"`
	MaxReceive  int     `json:"max_receive_count"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	// Duplicates are the extra deliveries of good messages (deliveries of
	// a good message past its first); DuplicatedMessages is how many good
	// messages were delivered more than once.
	Duplicates         int     `json:"duplicates"`
	DuplicatedMessages int     `json:"duplicated_messages"`
	DuplicateRate      float64 `json:"duplicate_rate"` // Duplicates / Good
	// Exposed is, summed over the kills, the good messages the target had
	// been sent whose delete had not been sent when pipes was killed: what
	// the kills themselves make duplicates.
	Exposed int `json:"exposed"`
	Lost    int `json:"lost"` // good messages never delivered nor dead-lettered
	// GoodInDLQ are good messages dead-lettered because kills spent their
	// receives (not pipes' doing; not lost either).
	GoodInDLQ    int `json:"good_in_dlq"`
	FailingInDLQ int `json:"failing_in_dlq"`
	// Calls are the SQS calls of every run, counted by the harness's
	// proxy in front of the server (killed runs cannot report theirs).
	Calls                 map[string]int `json:"calls"`
	Deleted               int            `json:"deleted"` // entries of DeleteMessageBatch calls
	DeleteCallsPerDeleted float64        `json:"delete_calls_per_deleted"`
	DeleteCallsPerMessage float64        `json:"delete_calls_per_message"` // per good message
	AnswerToDeleteP50Ms   float64        `json:"answer_to_delete_p50_ms"`
	AnswerToDeleteP90Ms   float64        `json:"answer_to_delete_p90_ms"`
	AnswerToDeleteP99Ms   float64        `json:"answer_to_delete_p99_ms"`
	DeleteEntriesPerCall  float64        `json:"delete_entries_per_call"`
	MsgsPerSec            float64        `json:"msgs_per_sec"`
	KillsAt               []int          `json:"kills_at"` // good messages delivered at each kill
	ExposedAtKill         []int          `json:"exposed_at_kill"`
	// UnansweredAtKill: of those, the ones the target had not answered.
	UnansweredAtKill []int `json:"unanswered_at_kill"`
	// ArrivalToDeleteMeanMs is the mean time from a good message's last
	// delivery to its delete.
	ArrivalToDeleteMeanMs float64 `json:"arrival_to_delete_mean_ms"`
}

// crashBody is a crash-scenario message body: its sequence number, whether
// the target fails it, and padding up to size bytes.
func crashBody(seq int, fail bool, size int) string {
	head := `{"seq":` + strconv.Itoa(seq) + `,"fail":` + strconv.FormatBool(fail) + `,"pad":"`
	return head + strings.Repeat("x", max(0, size-len(head)-2)) + `"}`
}

// ledger is what the crash scenario knows of every message, from the
// target (deliveries, answers) and the proxy (receipts, deletes). Safe for
// concurrent use.
type ledger struct {
	mu      sync.Mutex
	byID    map[string]*entry // by SQS message id
	byRH    map[string]string // receipt handle → message id
	goodSet atomic.Int64      // good messages delivered at least once
	// goodDeliveries counts every good message the target was sent.
	goodDeliveries atomic.Int64
	calls          map[string]int
	deleted        int
	delay          time.Duration
	// arrivalToDelete: from a good message's last delivery to its delete.
	arrivalToDelete []time.Duration
}

type entry struct {
	seq        int
	fail       bool
	deliveries int
	arrived    time.Time // last delivery to the target
	answered   time.Time // last answer of the target
	deleteSent time.Time // last DeleteMessageBatch naming it
	waits      []time.Duration
}

func newLedger() *ledger {
	return &ledger{byID: map[string]*entry{}, byRH: map[string]string{}, calls: map[string]int{}}
}

// exposed counts the good messages delivered since since whose delete was
// not sent after their last delivery.
func (l *ledger) exposed(since time.Time) (n, unanswered int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.byID {
		if !e.fail && e.answered.After(since) && e.deleteSent.Before(e.arrived) {
			n++
			if !e.answered.After(e.arrived) && l.delay > 0 {
				unanswered++
			}
		}
	}
	return n, unanswered
}

// crashTarget is the scenario's HTTP target: it takes batches of Pipes SQS
// records, records every delivery, and fails the messages whose body says
// so by a partial batch answer.
type crashTarget struct {
	l     *ledger
	delay time.Duration
	srv   *http.Server
	url   string
}

func startCrashTarget(l *ledger, delay time.Duration) (*crashTarget, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the crash target: %w", err)
	}
	t := &crashTarget{l: l, delay: delay, url: "http://" + ln.Addr().String() + "/"}
	t.srv = &http.Server{Handler: t, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *crashTarget) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var recs []struct {
		MessageID string `json:"messageId"`
		Body      string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&recs); err != nil {
		http.Error(w, "not a JSON array of records", http.StatusBadRequest)
		return
	}
	type failure struct {
		ID string `json:"itemIdentifier"`
	}
	failed := []failure{}
	now := time.Now()
	t.l.mu.Lock()
	for _, rec := range recs {
		var b struct {
			Seq  int  `json:"seq"`
			Fail bool `json:"fail"`
		}
		_ = json.Unmarshal([]byte(rec.Body), &b)
		e := t.l.byID[rec.MessageID]
		if e == nil {
			e = &entry{seq: b.Seq, fail: b.Fail}
			t.l.byID[rec.MessageID] = e
		}
		e.deliveries++
		e.arrived, e.answered = now, now
		switch {
		case b.Fail:
			failed = append(failed, failure{ID: rec.MessageID})
		case e.deliveries == 1:
			t.l.goodSet.Add(1)
			fallthrough
		default:
			t.l.goodDeliveries.Add(1)
		}
	}
	t.l.mu.Unlock()
	if t.delay > 0 {
		time.Sleep(t.delay)
		t.l.mu.Lock()
		now = time.Now()
		for _, rec := range recs {
			t.l.byID[rec.MessageID].answered = now
		}
		t.l.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"batchItemFailures": failed})
}

func (t *crashTarget) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = t.srv.Shutdown(ctx)
}

// sqsProxy stands between pipes and the SQS server: it counts calls by
// operation (X-Amz-Target) and reads receipt handles from ReceiveMessage
// answers and DeleteMessageBatch requests, so the ledger knows when each
// message's delete was sent.
type sqsProxy struct {
	l   *ledger
	srv *http.Server
	url string
}

func startSQSProxy(l *ledger, upstream string) (*sqsProxy, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, fmt.Errorf("parsing the SQS endpoint: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the SQS proxy: %w", err)
	}
	p := &sqsProxy{l: l, url: "http://" + ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 4 * time.Second}
	rp.ModifyResponse = p.answer
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed pipes cuts its calls short
	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.request(r)
		rp.ServeHTTP(w, r)
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func operation(h http.Header) string {
	op := h.Get("X-Amz-Target")
	if _, after, ok := strings.Cut(op, "."); ok {
		return after
	}
	if op == "" {
		return "other"
	}
	return op
}

// request counts a call and notes the deletes it sends.
func (p *sqsProxy) request(r *http.Request) {
	op := operation(r.Header)
	r.Header.Del("Accept-Encoding") // answers in clear, for answer
	var body []byte
	if op == "DeleteMessageBatch" || op == "DeleteMessage" {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	now := time.Now()
	p.l.mu.Lock()
	defer p.l.mu.Unlock()
	p.l.calls[op]++
	if body == nil {
		return
	}
	var in struct {
		ReceiptHandle string
		Entries       []struct{ ReceiptHandle string }
	}
	_ = json.Unmarshal(body, &in)
	if in.ReceiptHandle != "" {
		in.Entries = append(in.Entries, struct{ ReceiptHandle string }{in.ReceiptHandle})
	}
	for _, e := range in.Entries {
		p.l.deleted++
		if m := p.l.byID[p.l.byRH[e.ReceiptHandle]]; m != nil {
			if !m.answered.IsZero() && m.deleteSent.Before(m.answered) {
				m.waits = append(m.waits, now.Sub(m.answered))
				if !m.fail {
					p.l.arrivalToDelete = append(p.l.arrivalToDelete, now.Sub(m.arrived))
				}
			}
			m.deleteSent = now
		}
	}
}

// answer reads the receipt handles of a ReceiveMessage answer.
func (p *sqsProxy) answer(resp *http.Response) error {
	if operation(resp.Request.Header) != "ReceiveMessage" {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("reading a ReceiveMessage answer: %w", err)
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var out struct {
		Messages []struct{ MessageId, ReceiptHandle, Body string }
	}
	if json.Unmarshal(body, &out) != nil {
		return nil
	}
	p.l.mu.Lock()
	for _, m := range out.Messages {
		p.l.byRH[m.ReceiptHandle] = m.MessageId
	}
	p.l.mu.Unlock()
	return nil
}

func (p *sqsProxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}

// crash runs the crash scenario once per binary of -crash-bins.
func (h *harness) crash(ctx context.Context, res *Results) error {
	bins := []string{h.pipesBin}
	if b := strings.TrimSpace(h.o.crash.bins); b != "" && b != "pipes" {
		bins = strings.Split(b, ",")
	}
	var out []CrashResult
	for i, bin := range bins {
		if i > 0 {
			if err := sleep(ctx, 3*time.Second); err != nil { // abandoned long polls end
				return err
			}
		}
		r, err := h.crashOnce(ctx, strings.TrimSpace(bin), i)
		if err != nil {
			return err
		}
		out = append(out, r)
	}
	res.Crash = out
	return nil
}

func (h *harness) crashQueues(ctx context.Context, o crashOptions) (main, dlq string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	random := make([]byte, 4)
	for i := range random {
		random[i] = "abcdefghijklmnopqrstuvwxyz"[rand.N(26)]
	}
	name := "bench-crash-" + string(random)
	d, err := h.srv.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-dlq")})
	if err != nil {
		return "", "", fmt.Errorf("creating the crash DLQ: %w", err)
	}
	dlq = aws.ToString(d.QueueUrl)
	a, err := h.srv.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: d.QueueUrl, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", "", fmt.Errorf("reading the crash DLQ's ARN: %w", err)
	}
	policy := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, a.Attributes["QueueArn"], o.maxReceive)
	m, err := h.srv.client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		"VisibilityTimeout": strconv.Itoa(int(o.visibility.Seconds())),
		"RedrivePolicy":     policy,
	}})
	if err != nil {
		return "", "", fmt.Errorf("creating the crash queue: %w", err)
	}
	return aws.ToString(m.QueueUrl), dlq, nil
}

// crashFill sends the scenario's messages: fail[seq] says which fail.
func (h *harness) crashFill(ctx context.Context, url string, fail []bool, size int) error {
	var g sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	chunks := make(chan int)
	for range 8 {
		g.Go(func() {
			for start := range chunks {
				var entries []types.SendMessageBatchRequestEntry
				for i := start; i < min(start+10, len(fail)); i++ {
					entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i - start)), MessageBody: aws.String(crashBody(i, fail[i], size))})
				}
				out, err := h.srv.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%d entries failed", len(out.Failed))
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("filling the crash queue: %w", err))
					mu.Unlock()
				}
			}
		})
	}
	for start := 0; start < len(fail); start += 10 {
		chunks <- start
	}
	close(chunks)
	g.Wait()
	return errors.Join(errs...)
}

// crashDLQ reads the dead-lettered messages' sequence numbers.
func (h *harness) crashDLQ(ctx context.Context, url string) (map[int]bool, error) {
	seen := map[int]bool{}
	for empty := 0; empty < 2; {
		out, err := h.srv.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 600, WaitTimeSeconds: 1})
		if err != nil {
			return nil, fmt.Errorf("reading the crash DLQ: %w", err)
		}
		if len(out.Messages) == 0 {
			empty++
			continue
		}
		for _, m := range out.Messages {
			var b struct{ Seq int }
			_ = json.Unmarshal([]byte(aws.ToString(m.Body)), &b)
			seen[b.Seq] = true
		}
	}
	return seen, nil
}

func (h *harness) crashOnce(ctx context.Context, bin string, idx int) (CrashResult, error) {
	o := h.o.crash
	r := CrashResult{Binary: bin, Seed: o.seed, Messages: o.n, Kills: o.kills, Visibility: o.visibility.String(), MaxReceive: o.maxReceive, Concurrency: o.conc, Calls: map[string]int{}}
	rng := rand.New(rand.NewPCG(o.seed, 20))
	fail := make([]bool, o.n)
	nFail := int(float64(o.n) * o.failShare)
	for _, i := range rng.Perm(o.n)[:nFail] {
		fail[i] = true
	}
	r.Failing, r.Good = nFail, o.n-nFail
	// Kill instants: each run is killed once the target has had a seeded
	// share u in (0, 2) of the good messages left per kill left
	// (u × left/(kills left + 1) good deliveries from it), plus a seeded
	// 0-100 ms, so that kills spread over the drain and a kill falls
	// anywhere within a batch's life.
	share := make([]float64, o.kills)
	jitter := make([]time.Duration, o.kills)
	for i := range share {
		share[i] = 2 * rng.Float64()
		jitter[i] = time.Duration(rng.Int64N(int64(100 * time.Millisecond)))
	}

	l := newLedger()
	l.delay = o.delay
	tgt, err := startCrashTarget(l, o.delay)
	if err != nil {
		return r, err
	}
	defer tgt.close()
	px, err := startSQSProxy(l, h.srv.endpoint)
	if err != nil {
		return r, err
	}
	defer px.close()
	qurl, dlq, err := h.crashQueues(ctx, o)
	if err != nil {
		return r, err
	}
	defer h.srv.deleteQueue(dlq)
	defer h.srv.deleteQueue(qurl)
	if err := h.crashFill(ctx, qurl, fail, o.size); err != nil {
		return r, err
	}
	file := filepath.Join(h.tmp, fmt.Sprintf("crash-%d.yaml", idx))
	spec := pipeSpec{queueURL: qurl, wait: 2 * time.Second, maxConc: max(2, o.conc), initConc: cmp.Or(o.initConc, o.conc), record: true, targetURL: tgt.url}
	if err := os.WriteFile(file, []byte(pipelineYAML(px.url, spec)), 0o644); err != nil {
		return r, fmt.Errorf("writing the crash pipeline: %w", err)
	}
	run := 0
	start := func() (*child, error) {
		run++
		label := fmt.Sprintf("crash-%d-run%d", idx, run)
		return h.kids.start("pipes", filepath.Join(h.tmp, label+".log"), nil, bin, "run", "-f", file)
	}
	t0 := time.Now()
	c, err := start()
	if err != nil {
		return r, err
	}
	runStart := time.Now()
	for i, u := range share {
		left := int64(r.Good) - l.goodSet.Load()
		k := 1 + int64(u*float64(left)/float64(o.kills-i+1))
		// Toward the end few good messages are left: a run is killed after
		// 2 × the visibility at the latest.
		deadline := time.Now().Add(2 * o.visibility)
		thr := l.goodDeliveries.Load() + k
		for l.goodDeliveries.Load() < thr && time.Now().Before(deadline) {
			if ctx.Err() != nil {
				c.stop(10 * time.Second)
				return r, ctx.Err()
			}
			if c.exited() {
				return r, fmt.Errorf("crash scenario: pipes exited on its own: %s", h.logTail(fmt.Sprintf("crash-%d-run%d", idx, run)))
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(jitter[i])
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
		r.KillsAt = append(r.KillsAt, int(l.goodSet.Load()))
		e, un := l.exposed(runStart)
		r.ExposedAtKill = append(r.ExposedAtKill, e)
		r.UnansweredAtKill = append(r.UnansweredAtKill, un)
		r.Exposed += e
		runStart = time.Now()
		if c, err = start(); err != nil {
			return r, err
		}
	}
	// The last run drains the rest: every good message delivered, every
	// failing one dead-lettered, the queue empty.
	// Empty (nothing visible, nothing in flight) means every message was
	// deleted or dead-lettered.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		v, f, err := h.srv.count(ctx, qurl)
		if err == nil && v == 0 && f == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			c.stop(10 * time.Second)
			return r, fmt.Errorf("crash scenario: the queue did not drain (visible %d, in flight %d, good delivered %d of %d, err %v)", v, f, l.goodSet.Load(), r.Good, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.Seconds = time.Since(t0).Seconds()
	c.stop(30 * time.Second)
	inDLQ, err := h.crashDLQ(ctx, dlq)
	if err != nil {
		return r, err
	}

	l.mu.Lock()
	delivered := map[int]int{}
	var waits []time.Duration
	for _, e := range l.byID {
		if !e.fail {
			delivered[e.seq] += e.deliveries
			waits = append(waits, e.waits...)
		}
	}
	for op, n := range l.calls {
		r.Calls[op] = n
	}
	r.Deleted = l.deleted
	if len(l.arrivalToDelete) > 0 {
		var sum time.Duration
		for _, d := range l.arrivalToDelete {
			sum += d
		}
		r.ArrivalToDeleteMeanMs = float64(sum) / float64(len(l.arrivalToDelete)) / float64(time.Millisecond)
	}
	l.mu.Unlock()
	for seq := range o.n {
		switch {
		case fail[seq]:
			if inDLQ[seq] {
				r.FailingInDLQ++
			}
		case delivered[seq] > 1:
			r.Duplicates += delivered[seq] - 1
			r.DuplicatedMessages++
		case delivered[seq] == 0 && inDLQ[seq]:
			r.GoodInDLQ++
		case delivered[seq] == 0:
			r.Lost++
		}
	}
	r.DuplicateRate = float64(r.Duplicates) / float64(r.Good)
	del := float64(r.Calls["DeleteMessageBatch"] + r.Calls["DeleteMessage"])
	if r.Deleted > 0 {
		r.DeleteCallsPerDeleted = del / float64(r.Deleted)
		r.DeleteEntriesPerCall = float64(r.Deleted) / del
	}
	r.DeleteCallsPerMessage = del / float64(r.Good)
	r.MsgsPerSec = float64(r.Good) / r.Seconds
	slices.Sort(waits)
	q := func(p float64) float64 {
		if len(waits) == 0 {
			return 0
		}
		return float64(waits[min(len(waits)-1, int(p*float64(len(waits))))]) / float64(time.Millisecond)
	}
	r.AnswerToDeleteP50Ms, r.AnswerToDeleteP90Ms, r.AnswerToDeleteP99Ms = q(0.5), q(0.9), q(0.99)
	progress(fmt.Sprintf("crash %s (seed %d): %d duplicates of %d good messages (%.2f%%; %d messages), %d exposed at the kills %v (unanswered %v), delivery → delete mean %.1f ms, lost %d, good in DLQ %d, failing in DLQ %d of %d; DeleteMessageBatch %d = %.4f per deleted entry (%.2f entries a call), %.4f per good message; answer → delete p50 %.1f ms p90 %.1f ms p99 %.1f ms; %.1f s, calls %v",
		bin, o.seed, r.Duplicates, r.Good, 100*r.DuplicateRate, r.DuplicatedMessages, r.Exposed, r.ExposedAtKill, r.UnansweredAtKill, r.ArrivalToDeleteMeanMs, r.Lost, r.GoodInDLQ, r.FailingInDLQ, r.Failing,
		r.Calls["DeleteMessageBatch"], r.DeleteCallsPerDeleted, r.DeleteEntriesPerCall, r.DeleteCallsPerMessage, r.AnswerToDeleteP50Ms, r.AnswerToDeleteP90Ms, r.AnswerToDeleteP99Ms, r.Seconds, r.Calls))
	return r, nil
}
