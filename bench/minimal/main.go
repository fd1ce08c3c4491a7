// Command minimal is the hand-written SQS consumer the benchmark harness
// compares pipes against: a fixed number of workers, each receiving up to 10
// messages with a long poll, posting them as one JSON array of
// {"id": <messageId>, "order": <body>} to an HTTP target and deleting them
// with one DeleteMessageBatch. It runs until SIGINT or SIGTERM.
//
//	minimal -queue-url URL -endpoint URL -target URL -concurrency 16 -wait 2s
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "minimal:", err)
		os.Exit(1)
	}
}

// consumer holds what every worker shares.
type consumer struct {
	sqs      *sqs.Client
	http     *http.Client
	queueURL string
	target   string
	wait     int32
	log      *slog.Logger
}

func run() error {
	queueURL := flag.String("queue-url", "", "queue URL")
	endpoint := flag.String("endpoint", "", "SQS endpoint URL")
	target := flag.String("target", "", "HTTP target URL")
	concurrency := flag.Int("concurrency", 16, "workers (concurrent batches)")
	wait := flag.Duration("wait", 2*time.Second, "long-poll wait time")
	flag.Parse()
	if *queueURL == "" || *target == "" {
		return errors.New("-queue-url and -target are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("loading the AWS configuration: %w", err)
	}
	c := &consumer{
		sqs: sqs.NewFromConfig(cfg, func(o *sqs.Options) {
			if *endpoint != "" {
				o.BaseEndpoint = aws.String(*endpoint)
			}
		}),
		http:     &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency}, Timeout: 30 * time.Second},
		queueURL: *queueURL,
		target:   *target,
		wait:     int32(wait.Seconds()),
		log:      slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Go(func() { c.work(ctx) })
	}
	wg.Wait()
	return nil
}

// work receives, posts and deletes batches until ctx ends.
func (c *consumer) work(ctx context.Context) {
	var body bytes.Buffer
	for ctx.Err() == nil {
		out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:            aws.String(c.queueURL),
			MaxNumberOfMessages: 10,
			WaitTimeSeconds:     c.wait,
		})
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("receiving", "error", err)
				time.Sleep(100 * time.Millisecond)
			}
			continue
		}
		if len(out.Messages) == 0 {
			continue
		}
		body.Reset()
		body.WriteByte('[')
		for i, m := range out.Messages {
			if i > 0 {
				body.WriteByte(',')
			}
			body.WriteString(`{"id": "`)
			body.WriteString(aws.ToString(m.MessageId))
			body.WriteString(`", "order": `)
			body.WriteString(aws.ToString(m.Body))
			body.WriteByte('}')
		}
		body.WriteByte(']')
		if err := c.post(ctx, body.Bytes()); err != nil {
			c.log.Error("posting", "error", err)
			continue // the messages come back after their visibility timeout
		}
		entries := make([]types.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle}
		}
		// Deletes finish even while stopping, so that nothing delivered is left.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_, err = c.sqs.DeleteMessageBatch(dctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(c.queueURL), Entries: entries})
		cancel()
		if err != nil {
			c.log.Error("deleting", "error", err)
		}
	}
}

// post sends one batch to the target and checks for a 2xx answer.
func (c *consumer) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, c.target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the target request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("posting a batch to the target: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("posting a batch to the target: status %d", resp.StatusCode)
	}
	return nil
}
