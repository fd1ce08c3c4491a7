// Package sqs is the Amazon SQS source of pipes: it resolves a queue,
// long-polls it for messages in the Pipes record shape and settles them
// (delete, change visibility) in batches when the pipe says so. It decides
// nothing on its own: batching, scaling, heartbeats and outcomes belong to
// the pipe runtime.
package sqs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/sqsname"
	"github.com/pipesproject/pipes/source"
)

// Limits of SQS that the source applies.
const (
	// MaxWaitTime is the longest long-poll wait SQS accepts.
	MaxWaitTime = 20 * time.Second
	// DefaultVisibilityTimeout is what receives ask for when the queue's
	// own visibility timeout is 0 (SQS's default for new queues).
	DefaultVisibilityTimeout = 30 * time.Second
	// MaxVisibilityTimeout is the longest visibility timeout SQS accepts.
	MaxVisibilityTimeout = 12 * time.Hour
	// MaxBatch is the most messages one SQS call receives or settles.
	MaxBatch = 10
	// DefaultWaitTime is the long-poll wait pipes uses when the pipeline
	// file gives none (the config package applies it).
	DefaultWaitTime = 20 * time.Second
)

// Config says which queue a Source reads and how.
type Config struct {
	// QueueURL, QueueARN or QueueName names the queue; give exactly one.
	// A name is resolved in the client's region and account; an ARN in its
	// own region and account.
	QueueURL, QueueARN, QueueName string
	// Region overrides the region of the AWS config (for an ARN, the ARN's
	// region is used when Region is empty).
	Region string
	// Endpoint overrides the SQS endpoint (an SQS-compatible server).
	// AWS_ENDPOINT_URL_SQS works too, through the SDK.
	Endpoint string
	// WaitTime is the long-poll wait of each receive, used as given:
	// 0..20s, 0 short-polls. Pipeline files default it to DefaultWaitTime.
	WaitTime time.Duration
	// VisibilityTimeout, when not 0, is given to every receive instead of
	// the queue's own (1s..12h, rounded up to whole seconds).
	VisibilityTimeout time.Duration
	// OnCall, when set, is called once for every HTTP attempt sent to SQS
	// (SDK retries included) with the operation's name, e.g.
	// "ReceiveMessage". It must be safe for concurrent use and quick.
	OnCall func(operation string)
	// Logger receives debug logs of settle retries; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
	// Payloads, when set, unwraps payloads that live in S3 (Extended
	// Client pointers, S3 event notifications) as messages are received.
	Payloads *Payloads
	// QueueAt and EndpointAt, when set, are where the pipeline file names
	// the queue and the endpoint ("pipeline.yaml:7:14"): Open's errors
	// begin with them.
	QueueAt, EndpointAt string
}

// Source reads one SQS queue. Open it before the first Receive. All its
// methods are safe for concurrent use; it never settles a message on its
// own.
type Source struct {
	api    sqsAPI
	cfg    Config
	name   string // the queue as configured, for errors and logs
	log    *slog.Logger
	region string // the client's region
	// endpoint is the SQS endpoint the client calls, for errors.
	endpoint string

	backoffBase time.Duration // first settle retry wait; tests shorten it

	queue atomic.Pointer[queue] // set by Open

	payloads *payloads // nil: bodies are returned as they are

	polls pollClock // the long polls under way (PollLeft)
}

// queue is what Open resolved.
type queue struct {
	url    string
	arn    string
	region string
	info   source.Info
	// receiveVisibility is the VisibilityTimeout receives ask for: always
	// explicit, so the heartbeat and the server agree.
	receiveVisibility time.Duration
}

var (
	_ source.Source      = (*Source)(nil)
	_ source.Opener      = (*Source)(nil)
	_ source.Closer      = (*Source)(nil)
	_ source.Extender    = (*Source)(nil)
	_ source.AckObserver = (*Source)(nil)
)

// leanIdlePerHost is how many idle connections to SQS the source keeps: a
// receive and a delete per batch slot of a pipe at a few hundred batches.
// (The SDK's own client keeps 10, so a pipe at concurrency 16 dialled new
// connections all the time.)
const leanIdlePerHost = 512

// New checks cfg and builds the source's SQS client. It does no network
// I/O (loading the default AWS config reads environment and files only);
// Open resolves the queue.
func New(ctx context.Context, cfg Config) (*Source, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	awsCfg, err := awsclient.Load(ctx, cfg.AWSConfig)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration for SQS queue %s: %w", cfg.queueName(), err)
	}
	region := cfg.Region
	if region == "" && cfg.QueueARN != "" {
		a, _ := sqsname.ParseQueueARN(cfg.QueueARN) // validated above
		region = a.Region
	}
	var guess string
	if cfg.QueueURL != "" {
		guess = sqsname.RegionOfURL(cfg.QueueURL)
	}
	region, ok := awsclient.Region(awsCfg, region, guess)
	if !ok {
		return nil, fmt.Errorf("configuring SQS source %s: no AWS region: set the source's region, AWS_REGION or a profile's region", cfg.queueName())
	}
	ov := awsclient.Overrides{Region: region, Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger}
	// Receives and deletes are the hot path: they go over internal/h1 (no
	// goroutine hand-offs per call) unless the configuration brings its own
	// HTTP client or h1 is turned off.
	awsCfg.HTTPClient = awsclient.LeanHTTPClient(awsCfg.HTTPClient, leanIdlePerHost)
	client := sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	var api sqsAPI = client
	if d := newDirect(ctx, client.Options(), cfg.OnCall); d != nil {
		api = directAPI{sqsAPI: client, d: d}
	}
	src := newSource(cfg, api, client.Options().Region)
	src.endpoint = aws.ToString(client.Options().BaseEndpoint)
	if src.endpoint == "" {
		src.endpoint = "https://sqs." + client.Options().Region + ".amazonaws.com"
	}
	return src, nil
}

// newSource makes a source around api; tests give it a fake.
func newSource(cfg Config, api sqsAPI, region string) *Source {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Source{api: api, cfg: cfg, name: cfg.queueName(), log: log, region: region, backoffBase: settleBackoffBase,
		payloads: newPayloads(cfg.Payloads, log)}
}

func (c Config) validate() error {
	var errs []error
	given := 0
	for _, s := range []string{c.QueueURL, c.QueueARN, c.QueueName} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		errs = append(errs, errors.New("give exactly one of queue URL, queue ARN and queue name"))
	}
	if c.QueueARN != "" {
		if _, err := sqsname.ParseQueueARN(c.QueueARN); err != nil {
			errs = append(errs, err)
		}
	}
	if c.WaitTime < 0 || c.WaitTime > MaxWaitTime {
		errs = append(errs, fmt.Errorf("wait time %v is outside 0..%v", c.WaitTime, MaxWaitTime))
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > MaxVisibilityTimeout {
		errs = append(errs, fmt.Errorf("visibility timeout %v is outside 0..%v", c.VisibilityTimeout, MaxVisibilityTimeout))
	}
	if err := c.Payloads.check(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("configuring SQS source %s: %w", c.queueName(), err)
	}
	return nil
}

// queueName is how errors name the queue.
func (c Config) queueName() string {
	switch {
	case c.QueueName != "":
		return c.QueueName
	case c.QueueARN != "":
		return c.QueueARN
	case c.QueueURL != "":
		return c.QueueURL
	}
	return "(no queue)"
}

// Close releases the idle connections of the client's HTTP client when it
// has any to release. It does not block and never fails.
func (s *Source) Close(ctx context.Context) error {
	if c, ok := s.api.(*sqs.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	if s.payloads != nil && s.payloads.cfg.Store != nil {
		s.payloads.cfg.Store.Close()
	}
	return nil
}

// opened returns what Open resolved, or an error when Open has not run.
func (s *Source) opened() (*queue, error) {
	q := s.queue.Load()
	if q == nil {
		return nil, fmt.Errorf("SQS source %s: used before Open", s.name)
	}
	return q, nil
}
