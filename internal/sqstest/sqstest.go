// Package sqstest gives tests real SQS-compatible servers to run against:
// local-aws-sqs (pinned in .ci/sqs) and fauxqs (pinned in .ci/fauxqs, with
// the Node 22 it needs), each started once per test binary on its first use,
// plus helpers that create throwaway queues and read them back.
//
// The two servers are wrong in different places (see the README), so a test
// says which server behaviour it relies on: Servers runs it on both, and a
// test that needs what only one gets right calls EndpointOf and ClientOf
// with that one. Endpoint and Client mean local-aws-sqs.
//
// The package starts the Kinesis Data Streams emulator kinesalite (pinned
// in .ci/kinesalite) the same way: EndpointOf(t, Kinesalite).
//
// Tests fail when a server they ask for cannot be started and the
// environment variable CI is "true"; elsewhere they are skipped, with one
// line saying what provides the server (see internal/testenv). Setting
// PIPES_SQS_ENDPOINT (local-aws-sqs) or PIPES_FAUXQS_ENDPOINT (fauxqs) uses
// an already running server instead.
package sqstest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/pipesproject/pipes/internal/testenv"
)

// EnvEndpoint names the environment variable that points the tests at an
// already running local-aws-sqs (or any SQS-compatible server standing in
// for it) instead of starting one.
const EnvEndpoint = "PIPES_SQS_ENDPOINT"

// EnvKinesaliteEndpoint names the environment variable that points the
// tests at an already running kinesalite instead of starting one.
const EnvKinesaliteEndpoint = "PIPES_KINESALITE_ENDPOINT"

// EnvFauxqsEndpoint names the environment variable that points the tests
// at an already running fauxqs instead of starting one.
const EnvFauxqsEndpoint = "PIPES_FAUXQS_ENDPOINT"

// Region is the region the test clients sign for.
const Region = "us-east-1"

const (
	startTimeout   = 30 * time.Second
	installTimeout = 5 * time.Minute
	callTimeout    = 30 * time.Second
)

// Server names one of the SQS-compatible servers the tests run against.
type Server string

const (
	// LocalAWSSQS is local-aws-sqs@2.0.2 (.ci/sqs). It counts every
	// ChangeMessageVisibility as a receive, ignores
	// MessageSystemAttributeNames, does not lock FIFO message groups,
	// counts in-flight messages as visible and answers a long poll early
	// only when it can fill ten; it has move tasks, ReceiptHandleIsInvalid
	// and DeadLetterQueueSourceArn.
	LocalAWSSQS Server = "local-aws-sqs"
	// Fauxqs is fauxqs@2.4.1 (.ci/fauxqs), also an SNS (and S3) emulator.
	// It gets the consumer-side rules right (receive counts, FIFO group
	// locking, visibility, long polls) but reports a garbage receipt handle
	// as deleted, sets no DeadLetterQueueSourceArn, has no move tasks,
	// returns at most one message per FIFO group per receive and wakes
	// every waiting long poll on one send. Its queue URLs name the host
	// sqs.us-east-1.localhost, which does not resolve: clients must keep
	// the endpoint override.
	Fauxqs Server = "fauxqs"
)

// Kinesalite is kinesalite@3.3.3 (.ci/kinesalite), a Kinesis Data Streams
// emulator (not an SQS server: it is not in All), in memory, with streams
// ACTIVE at once.
const Kinesalite Server = "kinesalite"

// All lists every SQS server, in the order Servers runs them.
var All = []Server{LocalAWSSQS, Fauxqs}

// Servers runs fn as one subtest per server in All, named by the server.
// It blocks until they finish (subtests are not parallel unless fn says
// so). Use it for tests whose behaviour both servers get right.
func Servers(t *testing.T, fn func(t *testing.T, s Server)) {
	t.Helper()
	for _, s := range All {
		t.Run(string(s), func(t *testing.T) { fn(t, s) })
	}
}

// kind says where a server lives and how it is started.
type kind struct {
	dir    string // under the repository root
	env    string // names an already running server
	marker string // a file under dir that exists once npm ci ran
	node   string // the Node binary, "" for the machine's
}

var kinds = map[Server]kind{
	LocalAWSSQS: {dir: ".ci/sqs", env: EnvEndpoint, marker: "node_modules/local-aws-sqs/package.json"},
	Fauxqs:      {dir: ".ci/fauxqs", env: EnvFauxqsEndpoint, marker: "node_modules/fauxqs/package.json", node: "node_modules/.bin/node"},
	Kinesalite:  {dir: ".ci/kinesalite", env: EnvKinesaliteEndpoint, marker: "node_modules/kinesalite/package.json"},
}

// server is the one process of one server kind in this test binary. It is
// test-helper state: the process's stdin pipe is kept here so that the
// server lives as long as the test binary and exits when the binary's
// pipes close.
type server struct {
	once     sync.Once
	endpoint string
	err      error
	stdin    io.WriteCloser
}

var shared = map[Server]*server{LocalAWSSQS: {}, Fauxqs: {}, Kinesalite: {}}

// Endpoint is EndpointOf(t, LocalAWSSQS).
func Endpoint(t testing.TB) string {
	t.Helper()
	return EndpointOf(t, LocalAWSSQS)
}

// EndpointOf returns the base URL of a running server of kind s: the one
// named by its environment variable, or else a server this test binary
// starts on its first call and shares with every later call (it is stopped
// when the test binary exits). It is safe for concurrent use. When the
// server cannot be started it fails the test under CI=true and skips it
// otherwise.
func EndpointOf(t testing.TB, s Server) string {
	t.Helper()
	k, ok := kinds[s]
	if !ok {
		t.Fatalf("sqstest: unknown server %q", s)
	}
	if ep := os.Getenv(k.env); ep != "" {
		return ep
	}
	sh := shared[s]
	sh.once.Do(func() { sh.endpoint, sh.stdin, sh.err = start(s, k) })
	if sh.err != nil {
		testenv.Missing(t, testenv.Service{
			Name: "the " + string(s) + " test server (" + k.what() + ", from npm)",
			Fix:  "install Node.js and npm (the tests then run `npm ci` in " + k.dir + " themselves), run `npm ci` in " + k.dir + ", or point " + k.env + " at a running one",
		}, sh.err)
	}
	return sh.endpoint
}

// what says what the server stands in for.
func (k kind) what() string {
	if k.env == EnvKinesaliteEndpoint {
		return "a Kinesis stand-in"
	}
	return "an SQS stand-in"
}

// start installs the server's packages when needed and starts it.
func start(s Server, k kind) (endpoint string, stdin io.WriteCloser, err error) {
	root, err := repoRoot()
	if err != nil {
		return "", nil, err
	}
	dir := filepath.Join(root, filepath.FromSlash(k.dir))
	if err := install(dir, k.marker); err != nil {
		return "", nil, err
	}
	node := filepath.Join(dir, filepath.FromSlash(k.node))
	if k.node == "" {
		if node, err = exec.LookPath("node"); err != nil {
			return "", nil, fmt.Errorf("finding node: %w", err)
		}
	}
	cmd := exec.Command(node, "server.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORT=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err = cmd.StdinPipe()
	if err != nil {
		return "", nil, fmt.Errorf("starting the %s test server: %w", s, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, fmt.Errorf("starting the %s test server: %w", s, err)
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting the %s test server: %w", s, err)
	}
	port, err := readPort(stdout, startTimeout)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return "", nil, fmt.Errorf("starting the %s test server in %s: %w (stderr: %s)", s, dir, err, strings.TrimSpace(stderr.String()))
	}
	return "http://127.0.0.1:" + strconv.Itoa(port), stdin, nil
}

// readPort reads the server's "listening <port>" line, giving up after
// timeout. The reading goroutine ends when the line is read or the server's
// stdout closes (the caller kills the server on a timeout).
func readPort(r io.Reader, timeout time.Duration) (int, error) {
	type result struct {
		line string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		done <- result{line, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case res := <-done:
		if res.err != nil {
			return 0, fmt.Errorf("reading its port: %w", res.err)
		}
		return parsePort(res.line)
	case <-timer.C:
		return 0, fmt.Errorf("no port announced within %v", timeout)
	}
}

// parsePort parses the "listening <port>" line the server prints.
func parsePort(line string) (int, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if !ok {
		return 0, fmt.Errorf("unexpected first line %q", line)
	}
	port, err := strconv.Atoi(rest)
	if err != nil || port <= 0 || port > 65535 {
		return 0, fmt.Errorf("unexpected port in %q", line)
	}
	return port, nil
}

// repoRoot walks up from the working directory to the folder with go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// install runs `npm ci` in dir unless the marker file (relative to dir)
// shows its packages are there. A file lock keeps test binaries running side
// by side from installing at once.
func install(dir, marker string) error {
	marker = filepath.Join(dir, filepath.FromSlash(marker))
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	unlock, err := lockFile(filepath.Join(os.TempDir(), "pipes-sqstest-"+hashPath(dir)+".lock"))
	if err != nil {
		return fmt.Errorf("locking the npm install of %s: %w", dir, err)
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil {
		return nil // another test binary installed it meanwhile
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("finding npm: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("running npm ci in %s: %w: %s", dir, err, bytes.TrimSpace(out))
	}
	return nil
}

// hashPath turns a path into a short name usable in a file name.
func hashPath(p string) string {
	var h uint64 = 14695981039346656037 // FNV-1a
	for i := 0; i < len(p); i++ {
		h ^= uint64(p[i])
		h *= 1099511628211
	}
	return strconv.FormatUint(h, 36)
}

// Credentials are the static fake credentials of the test clients.
var Credentials = credentials.NewStaticCredentialsProvider("AKIDPIPESTEST", "pipes-test-secret", "")

// Client is ClientOf(t, LocalAWSSQS).
func Client(t testing.TB) *sqs.Client {
	t.Helper()
	return ClientOf(t, LocalAWSSQS)
}

// ClientOf returns an SQS client for EndpointOf(t, s): region us-east-1,
// static fake credentials, the SDK's default retries. It skips or fails
// the test like EndpointOf does.
func ClientOf(t testing.TB, s Server) *sqs.Client {
	t.Helper()
	ep := EndpointOf(t, s)
	return sqs.New(sqs.Options{Region: Region, BaseEndpoint: aws.String(ep), Credentials: Credentials})
}

// SNSClient returns an SNS client for fauxqs's SNS (local-aws-sqs has
// none), set up like ClientOf.
func SNSClient(t testing.TB) *sns.Client {
	t.Helper()
	ep := EndpointOf(t, Fauxqs)
	return sns.New(sns.Options{Region: Region, BaseEndpoint: aws.String(ep), Credentials: Credentials})
}

// QueueOptions says how CreateQueue makes a queue.
type QueueOptions struct {
	// FIFO makes a FIFO queue (its name ends in ".fifo").
	FIFO bool
	// VisibilityTimeout is the queue's visibility timeout; 0 keeps the
	// server's default (30 s). Keep it at least the long-poll wait.
	VisibilityTimeout time.Duration
	// MaxReceiveCount, when above 0, gives the queue a dead-letter queue
	// and a redrive policy with this maxReceiveCount.
	MaxReceiveCount int
	// ReceiveWait is the queue's ReceiveMessageWaitTimeSeconds; 0 keeps
	// the default (short polls).
	ReceiveWait time.Duration
}

// CreateQueue creates a queue with a name unique to this call (from
// t.Name() and a random suffix) and, when opts.MaxReceiveCount > 0, its
// dead-letter queue first (dlqURL is "" otherwise). Both are deleted when
// the test ends.
func CreateQueue(t testing.TB, c *sqs.Client, opts QueueOptions) (queueURL, dlqURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	suffix := ""
	if opts.FIFO {
		suffix = ".fifo"
	}
	base := QueueName(t.Name(), suffix)
	attrs := map[string]string{}
	if opts.FIFO {
		attrs[string(types.QueueAttributeNameFifoQueue)] = "true"
	}
	if opts.VisibilityTimeout > 0 {
		attrs[string(types.QueueAttributeNameVisibilityTimeout)] = seconds(opts.VisibilityTimeout)
	}
	if opts.ReceiveWait > 0 {
		attrs[string(types.QueueAttributeNameReceiveMessageWaitTimeSeconds)] = seconds(opts.ReceiveWait)
	}
	if opts.MaxReceiveCount > 0 {
		dlqAttrs := map[string]string{}
		if opts.FIFO {
			dlqAttrs[string(types.QueueAttributeNameFifoQueue)] = "true"
		}
		dlqURL = create(ctx, t, c, strings.TrimSuffix(base, suffix)+"-dlq"+suffix, dlqAttrs)
		out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(dlqURL),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
		})
		if err != nil {
			t.Fatalf("sqstest: reading the ARN of %s: %v", dlqURL, err)
		}
		policy, err := json.Marshal(map[string]any{
			"deadLetterTargetArn": out.Attributes[string(types.QueueAttributeNameQueueArn)],
			"maxReceiveCount":     opts.MaxReceiveCount,
		})
		if err != nil {
			t.Fatalf("sqstest: encoding a redrive policy: %v", err)
		}
		attrs[string(types.QueueAttributeNameRedrivePolicy)] = string(policy)
	}
	queueURL = create(ctx, t, c, base, attrs)
	return queueURL, dlqURL
}

// create creates one queue and deletes it when the test ends.
func create(ctx context.Context, t testing.TB, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("sqstest: creating queue %s: %v", name, err)
	}
	url := aws.ToString(out.QueueUrl)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		if _, err := c.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
			t.Errorf("sqstest: deleting queue %s: %v", url, err)
		}
	})
	return url
}

// maxQueueName is SQS's limit on queue names, suffix included.
const maxQueueName = 80

// QueueName makes a unique queue name from prefix (e.g. a test name): the
// characters SQS refuses become "_", and a random part and suffix (".fifo"
// or "") end it, within SQS's 80 characters. Room is left for a "-dlq"
// before the suffix.
func QueueName(prefix, suffix string) string {
	random := make([]byte, 6)
	_, _ = rand.Read(random) // crypto/rand.Read never fails
	tail := "-" + hex.EncodeToString(random)
	room := maxQueueName - len(tail) - len(suffix) - len("-dlq")
	var b strings.Builder
	for i := 0; i < len(prefix) && b.Len() < room; i++ {
		ch := prefix[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '-', ch == '_':
			b.WriteByte(ch)
		default:
			b.WriteByte('_')
		}
	}
	return b.String() + tail + suffix
}

func seconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// SendBodies sends one message per body with SendMessageBatch, ten at a
// time, and returns their message ids in order. On a FIFO queue (URL
// ending in ".fifo") all go to message group "g" with unique deduplication
// ids.
func SendBodies(t testing.TB, c *sqs.Client, url string, bodies ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	fifo := strings.HasSuffix(url, ".fifo")
	ids := make([]string, len(bodies))
	for start := 0; start < len(bodies); start += 10 {
		chunk := bodies[start:min(start+10, len(bodies))]
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, body := range chunk {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(start + i)), MessageBody: aws.String(body)}
			if fifo {
				entries[i].MessageGroupId = aws.String("g")
				entries[i].MessageDeduplicationId = aws.String(QueueName("d", ""))
			}
		}
		out, err := c.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			t.Fatalf("sqstest: sending %d messages to %s: %v", len(entries), url, err)
		}
		for _, f := range out.Failed {
			t.Fatalf("sqstest: sending message %s to %s failed: %s %s", aws.ToString(f.Id), url, aws.ToString(f.Code), aws.ToString(f.Message))
		}
		for _, s := range out.Successful {
			i, err := strconv.Atoi(aws.ToString(s.Id))
			if err != nil || i < 0 || i >= len(ids) {
				t.Fatalf("sqstest: unexpected entry id %q in the answer of %s", aws.ToString(s.Id), url)
			}
			ids[i] = aws.ToString(s.MessageId)
		}
	}
	return ids
}

// Count returns the queue's ApproximateNumberOfMessages (visible) and
// ApproximateNumberOfMessagesNotVisible (inflight) as the server reports
// them. Note: local-aws-sqs counts in-flight messages in both numbers, so
// check "empty" as visible == 0 && inflight == 0.
func Count(t testing.TB, c *sqs.Client, url string) (visible, inflight int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		t.Fatalf("sqstest: counting the messages of %s: %v", url, err)
	}
	visible, err1 := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inflight, err2 := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("sqstest: counting the messages of %s: %v", url, err)
	}
	return visible, inflight
}

// CountReleased is Count once no message of the queue is in flight, or
// once within has passed (then it returns what it counted last). A release
// is not seen at once: local-aws-sqs applies a ChangeMessageVisibility(Batch)
// to 0 on a timer (setTimeout 0) after it answered, so a count made right
// after the answer can still find those messages in flight for a few
// milliseconds; AWS's counts are approximate too. Keep within well below
// the visibility the messages were hidden with, so that a message never
// released still shows in flight.
func CountReleased(t testing.TB, c *sqs.Client, url string, within time.Duration) (visible, inflight int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		visible, inflight = Count(t, c, url)
		if inflight == 0 || time.Now().After(deadline) {
			return visible, inflight
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// DrainBodies receives the visible messages of the queue until a receive
// comes back empty (each receive waits the queue's own ReceiveWait: the
// SDK cannot send a zero wait), deleting each, and returns their bodies
// in the order received. In-flight messages are not waited for.
func DrainBodies(t testing.TB, c *sqs.Client, url string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var bodies []string
	for {
		out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(url),
			MaxNumberOfMessages: 10,
			WaitTimeSeconds:     0,
		})
		if err != nil {
			t.Fatalf("sqstest: draining %s: %v", url, err)
		}
		if len(out.Messages) == 0 {
			return bodies
		}
		entries := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
		}
		del, err := c.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil {
			t.Fatalf("sqstest: deleting drained messages of %s: %v", url, err)
		}
		for _, f := range del.Failed {
			t.Fatalf("sqstest: deleting a drained message of %s failed: %s %s", url, aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
}
