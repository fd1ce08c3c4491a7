package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// sqsServer is the local SQS-compatible server (node server.mjs in .ci/sqs
// or .ci/fauxqs) the harness starts and stops.
type sqsServer struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	endpoint string
	client   *sqs.Client
}

// serverKind says where a test server lives and which Node runs it.
type serverKind struct {
	dir    string // under the repository root
	marker string // a file under dir that exists once npm ci ran
	node   string // the Node binary under dir; "" for the machine's node
}

// servers are the values of -server.
var servers = map[string]serverKind{
	"local-aws-sqs": {dir: ".ci/sqs", marker: "node_modules/local-aws-sqs/package.json"},
	// fauxqs needs Node >= 22.5: its folder brings its own.
	"fauxqs": {dir: ".ci/fauxqs", marker: "node_modules/fauxqs/package.json", node: "node_modules/.bin/node"},
}

// startServer installs the packages of the server named kind (a key of
// servers) when needed, starts it and waits (at most 20 s) for its port.
func startServer(ctx context.Context, root, kind string) (*sqsServer, error) {
	k, ok := servers[kind]
	if !ok {
		return nil, fmt.Errorf("unknown server %q", kind)
	}
	dir := filepath.Join(root, filepath.FromSlash(k.dir))
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(k.marker))); err != nil {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ictx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("running npm ci in %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
		}
	}
	node := "node"
	if k.node != "" {
		node = filepath.Join(dir, filepath.FromSlash(k.node))
	}
	cmd := exec.Command(node, "server.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORT=0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the SQS server: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the SQS server: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the SQS server: %w", err)
	}
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var line string
	select {
	case line = <-lines:
	case <-time.After(20 * time.Second):
	}
	port, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "listening "))
	if err != nil || port <= 0 {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("starting the SQS server: no port announced (got %q)", line)
	}
	s := &sqsServer{cmd: cmd, stdin: stdin, endpoint: "http://127.0.0.1:" + strconv.Itoa(port)}
	s.client = sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("x", "x", ""),
	})
	return s, nil
}

// stop ends the server (closing its stdin makes it exit; a kill follows
// after 5 s).
func (s *sqsServer) stop() {
	_ = s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// pid is the server process's id, for its CPU time.
func (s *sqsServer) pid() int { return s.cmd.Process.Pid }

// createQueue makes a fresh queue with a random name.
func (s *sqsServer) createQueue(ctx context.Context, prefix string, visibility time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	random := make([]byte, 5)
	_, _ = rand.Read(random)
	name := prefix + "-" + hex.EncodeToString(random)
	out, err := s.client.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name),
		Attributes: map[string]string{"VisibilityTimeout": strconv.Itoa(int(visibility.Seconds()))},
	})
	if err != nil {
		return "", fmt.Errorf("creating queue %s: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// deleteQueue deletes a queue, reporting failures on stderr only.
func (s *sqsServer) deleteQueue(url string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}); err != nil {
		fmt.Fprintf(os.Stderr, "bench: deleting queue %s: %v\n", url, err)
	}
}

// orderBody is a message body of about size bytes that the bench pattern
// matches: {"kind":"order","amount":i,"pad":"xxx..."}.
func orderBody(i, size int) string {
	head := `{"kind":"order","amount":` + strconv.Itoa(i+1) + `,"pad":"`
	pad := max(0, size-len(head)-2)
	return head + strings.Repeat("x", pad) + `"}`
}

// fill sends n messages of about size bytes, ten per SendMessageBatch (fewer
// for large messages: a batch carries at most 256 KiB), from 8 senders at
// once; first numbers the first message's amount.
func (s *sqsServer) fill(ctx context.Context, url string, first, n, size int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	per := max(1, min(10, 250_000/(size+64)))
	chunks := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for range 8 {
		wg.Go(func() {
			for start := range chunks {
				entries := make([]types.SendMessageBatchRequestEntry, 0, per)
				for i := start; i < min(start+per, first+n); i++ {
					entries = append(entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i - start)), MessageBody: aws.String(orderBody(i, size))})
				}
				out, err := s.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
				if err == nil && len(out.Failed) > 0 {
					err = fmt.Errorf("%d entries failed: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("sending %d messages to %s: %w", len(entries), url, err))
					mu.Unlock()
				}
			}
		})
	}
	for start := first; start < first+n; start += per {
		select {
		case chunks <- start:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(chunks)
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return ctx.Err()
}

// count returns the queue's visible and in-flight message counts.
func (s *sqsServer) count(ctx context.Context, url string) (visible, inflight int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := s.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		return 0, 0, fmt.Errorf("counting the messages of %s: %w", url, err)
	}
	visible, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	inflight, _ = strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return visible, inflight, nil
}

// waitEmpty waits until the queue has no visible and no in-flight message.
func (s *sqsServer) waitEmpty(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		v, f, err := s.count(ctx, url)
		if err == nil && v == 0 && f == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("queue %s not empty after %v (visible %d, in flight %d, err %v)", url, timeout, v, f, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
