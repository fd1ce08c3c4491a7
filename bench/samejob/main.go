// Command samejob is the hand-written consumer that does pipes' job in the
// benchmark's same-job comparison (issue 11), written the obvious way with
// aws-sdk-go-v2 and encoding/json: a fixed number of workers, each
// receiving up to 10 messages with a long poll and every attribute (system
// and message attributes), building the Pipes SQS record of each message
// with encoding/json, posting the batch as one JSON array to an HTTP
// target, decoding the partial batch answer ({"batchItemFailures":
// [{"itemIdentifier": id}]}) and deleting the others with one
// DeleteMessageBatch. It runs until SIGINT or SIGTERM; deletes under way
// finish.
//
//	samejob -queue-url URL -endpoint URL -target URL -concurrency 16 -wait 2s
//
// With -pool N its SQS client's HTTP transport keeps up to N idle
// connections (per host and in all) instead of the SDK's default 10 per
// host, so that N workers' calls need no new connections; AWS_CA_BUNDLE
// still applies.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "samejob:", err)
		os.Exit(1)
	}
}

// record is the Pipes SQS record of a message (the shape pipes sends).
type record struct {
	MessageID              string               `json:"messageId"`
	ReceiptHandle          string               `json:"receiptHandle"`
	Body                   string               `json:"body"`
	Attributes             map[string]string    `json:"attributes"`
	MessageAttributes      map[string]attribute `json:"messageAttributes"`
	MD5OfBody              string               `json:"md5OfBody"`
	MD5OfMessageAttributes string               `json:"md5OfMessageAttributes,omitempty"`
	EventSource            string               `json:"eventSource"`
	EventSourceARN         string               `json:"eventSourceARN"`
	AWSRegion              string               `json:"awsRegion"`
}

// attribute is a message attribute as the record shows it.
type attribute struct {
	StringValue *string `json:"stringValue,omitempty"`
	BinaryValue []byte  `json:"binaryValue,omitempty"`
	DataType    string  `json:"dataType"`
}

// answer is the partial batch answer.
type answer struct {
	BatchItemFailures []struct {
		ItemIdentifier string `json:"itemIdentifier"`
	} `json:"batchItemFailures"`
}

// consumer holds what every worker shares.
type consumer struct {
	sqs      *sqs.Client
	http     *http.Client
	queueURL string
	arn      string
	region   string
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
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	pool := flag.Int("pool", 0, "idle connections the SQS client keeps, per host and in all (0: the SDK's default, 10 per host)")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("creating the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if *queueURL == "" || *target == "" {
		return errors.New("-queue-url and -target are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if *pool > 0 {
		if cfg.HTTPClient, err = sizedPool(cfg.HTTPClient, *pool); err != nil {
			return err
		}
	}
	c := &consumer{
		sqs: sqs.NewFromConfig(cfg, func(o *sqs.Options) {
			if *endpoint != "" {
				o.BaseEndpoint = aws.String(*endpoint)
			}
		}),
		http:     &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *concurrency}, Timeout: 30 * time.Second},
		queueURL: *queueURL,
		region:   cfg.Region,
		target:   *target,
		wait:     int32(wait.Seconds()),
		log:      slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	attrs, err := c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: queueURL, AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return fmt.Errorf("reading the queue's ARN: %w", err)
	}
	c.arn = attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	var wg sync.WaitGroup
	for range *concurrency {
		wg.Go(func() { c.work(ctx) })
	}
	wg.Wait()
	return nil
}

// sizedPool returns the SDK's HTTP client (hc, or a new default one when
// the configuration has none) with room for n idle connections per host
// and in all. hc keeps its other settings (AWS_CA_BUNDLE's root CAs).
func sizedPool(hc aws.HTTPClient, n int) (aws.HTTPClient, error) {
	bc := awshttp.NewBuildableClient()
	if hc != nil {
		c, ok := hc.(*awshttp.BuildableClient)
		if !ok {
			return nil, fmt.Errorf("sizing the SQS client's idle pool: the configuration's HTTP client is a %T", hc)
		}
		bc = c
	}
	return bc.WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConnsPerHost = max(tr.MaxIdleConnsPerHost, n)
		tr.MaxIdleConns = max(tr.MaxIdleConns, n)
	}), nil
}

// work receives, posts and deletes batches until ctx ends.
func (c *consumer) work(ctx context.Context) {
	for ctx.Err() == nil {
		out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(c.queueURL),
			MaxNumberOfMessages:         10,
			WaitTimeSeconds:             c.wait,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
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
		records := make([]record, len(out.Messages))
		for i, m := range out.Messages {
			records[i] = c.record(m)
		}
		body, err := json.Marshal(records)
		if err != nil {
			c.log.Error("encoding the records", "error", err)
			continue
		}
		failed, err := c.post(ctx, body)
		if err != nil {
			c.log.Error("posting", "error", err)
			continue // the messages come back after their visibility timeout
		}
		entries := make([]types.DeleteMessageBatchRequestEntry, 0, len(out.Messages))
		for i, m := range out.Messages {
			if failed[aws.ToString(m.MessageId)] {
				continue
			}
			entries = append(entries, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		if len(entries) == 0 {
			continue
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

// record builds m's Pipes SQS record.
func (c *consumer) record(m types.Message) record {
	r := record{
		MessageID:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Attributes:             m.Attributes,
		MessageAttributes:      make(map[string]attribute, len(m.MessageAttributes)),
		MD5OfBody:              aws.ToString(m.MD5OfBody),
		MD5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		EventSource:            "aws:sqs",
		EventSourceARN:         c.arn,
		AWSRegion:              c.region,
	}
	if r.Attributes == nil {
		r.Attributes = map[string]string{}
	}
	for k, v := range m.MessageAttributes {
		r.MessageAttributes[k] = attribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
	}
	return r
}

// post sends one batch to the target, checks for a 2xx answer and returns
// the ids the answer names as failed.
func (c *consumer) post(ctx context.Context, body []byte) (map[string]bool, error) {
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, c.target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the target request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("posting a batch to the target: %w", err)
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the target's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("posting a batch to the target: status %d", resp.StatusCode)
	}
	failed := map[string]bool{}
	if len(bytes.TrimSpace(data)) == 0 {
		return failed, nil
	}
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("decoding the target's answer %q: %w", strings.TrimSpace(string(data)), err)
	}
	for _, f := range a.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}
