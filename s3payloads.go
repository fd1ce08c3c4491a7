package pipes

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/s3payload"
	"github.com/pipesproject/pipes/internal/sqsname"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/sqs"
	"github.com/pipesproject/pipes/target/sqstarget"
)

// Large payloads through S3: the sqs source's `unwrap: s3pointer | s3event
// | auto`, `delete_payloads` and `s3:`, and the sqs target's `offload:`.

// sqsPayloads is what the sqs source of s does with payloads in S3; nil
// when its unwrap involves none.
func sqsPayloads(ctx context.Context, s config.Pipe, env *Env) (*sqs.Payloads, error) {
	src := s.Source
	p := &sqs.Payloads{
		Pointers: src.Unwrap == source.UnwrapS3Pointer || src.Unwrap == source.UnwrapAuto,
		Events:   src.Unwrap == source.UnwrapS3Event || src.Unwrap == source.UnwrapAuto,
		Delete:   src.DeletePayloads,
	}
	if !p.Pointers && !p.Events {
		return nil, nil
	}
	if !p.Pointers {
		return p, nil
	}
	var c config.S3
	if src.S3 != nil {
		c = *src.S3
	}
	// The SQS source's rule: its region, else its ARN's, else the AWS
	// config's, else its URL's.
	if c.Region == "" {
		c.Region = src.Region
	}
	if a, err := sqsname.ParseQueueARN(src.QueueARN); c.Region == "" && err == nil {
		c.Region = a.Region
	}
	store, err := s3Store(ctx, s, c, sqsname.RegionOfURL(src.QueueURL), env, nil)
	if err != nil {
		return nil, err
	}
	p.Store, p.Concurrency = store, c.Concurrency
	p.MissingIsPermanent = c.MissingObject == "dead_letter"
	deleted := env.Metrics.PayloadDeletes
	ok, failed := deleted.WithLabelValues(s.Name, "ok"), deleted.WithLabelValues(s.Name, "failed")
	p.OnDelete = func(bad bool) {
		if bad {
			failed.Inc()
		} else {
			ok.Inc()
		}
	}
	return p, nil
}

// sqsOffload is the offload of the sqs target t of pipe s; nil without one.
func sqsOffload(ctx context.Context, s config.Pipe, t config.Target, env *Env, awsCfg *aws.Config) (*sqstarget.Offload, error) {
	o := t.Offload
	if o == nil {
		return nil, nil
	}
	c := o.S3
	if c.Region == "" {
		c.Region = t.Region
	}
	store, err := s3Store(ctx, s, c, sqsname.RegionOfURL(t.QueueURL), env, awsCfg)
	if err != nil {
		return nil, err
	}
	return &sqstarget.Offload{Bucket: o.Bucket, KeyPrefix: o.KeyPrefix, Threshold: o.Threshold, Store: store}, nil
}

// s3Store builds the S3 client of a pipe's payloads, from awsCfg when it is
// not nil, else the default chain; guess is the region when neither c nor
// the AWS config gives one. It does no network I/O.
func s3Store(ctx context.Context, s config.Pipe, c config.S3, guess string, env *Env, awsCfg *aws.Config) (*s3payload.Store, error) {
	m, name := env.Metrics, s.Name
	return s3payload.NewStore(ctx, s3payload.Config{
		Region:        c.Region,
		RegionGuess:   guess,
		Endpoint:      c.Endpoint,
		PathStyle:     c.PathStyle,
		MaxObjectSize: int64(c.MaxObjectSize),
		OnCall:        func(op string) { m.CountCall(name, op) },
		Logger:        env.Logger.With("pipe", name),
		AWSConfig:     awsCfg,
	})
}
