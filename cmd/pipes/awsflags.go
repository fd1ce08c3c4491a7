package main

import (
	"context"
	"fmt"
	"net/url"

	"github.com/spf13/pflag"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
)

// awsFlags are the AWS CLI's --region, --profile and --endpoint-url, on
// the commands that call AWS (run, send, test --enrich; dlq has its own,
// the same names). They override every pipe's AWS region and endpoint,
// as AWS_REGION, AWS_PROFILE and AWS_ENDPOINT_URL_SQS do for the pipes
// that set none.
type awsFlags struct {
	region   string
	profile  string
	endpoint string
}

// register adds the flags to fl; what says what they reach ("the sqs
// source and the AWS targets").
func (a *awsFlags) register(fl *pflag.FlagSet, what string) {
	fl.StringVar(&a.region, "region", "", "the AWS region of "+what+", over every pipe's region (default: the pipe's, else the AWS config chain's, AWS_REGION included)")
	fl.StringVar(&a.profile, "profile", "", "the AWS shared config profile whose credentials and region to use (default: the AWS config chain's, AWS_PROFILE included)")
	fl.StringVar(&a.endpoint, "endpoint-url", "", "the endpoint URL of "+what+", an AWS-compatible server, over every pipe's endpoint (default: the pipe's, else AWS_ENDPOINT_URL_<SERVICE> or AWS)")
}

// check refuses an --endpoint-url that is not an http(s) URL.
func (a awsFlags) check() error {
	if a.endpoint == "" {
		return nil
	}
	u, err := url.Parse(a.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--endpoint-url %q: want an http:// or https:// URL such as http://127.0.0.1:4566", a.endpoint)
	}
	return nil
}

// context gives ctx the --profile, for every AWS client built under it
// (awsclient.Load).
func (a awsFlags) context(ctx context.Context) context.Context {
	return awsclient.WithProfile(ctx, a.profile)
}

// apply sets --region and --endpoint-url on every AWS part of the pipes:
// an sqs source, a lambda enrichment, an AWS target and dead-letter target
// (sqs, sns, eventbridge, lambda). S3 payload blocks (s3, offload) keep
// their own. An endpoint set here forgets where the file's was written, so
// that an error about it does not point at the file's line.
func (a awsFlags) apply(specs []config.Pipe) []config.Pipe {
	if a.region == "" && a.endpoint == "" {
		return specs
	}
	set := func(region, endpoint *string) {
		if a.region != "" {
			*region = a.region
		}
		if a.endpoint != "" {
			*endpoint = a.endpoint
		}
	}
	for i := range specs {
		s := &specs[i]
		if s.Source.Type == "sqs" {
			set(&s.Source.Region, &s.Source.Endpoint)
			if a.endpoint != "" {
				s.Source.EndpointPos = config.Pos{}
			}
		}
		if e := s.Enrichment; e != nil && (e.Type == "lambda" || e.Type == "stepfunctions") {
			set(&e.Region, &e.Endpoint)
		}
		if isAWSTarget(s.Target.Type) {
			set(&s.Target.Region, &s.Target.Endpoint)
		}
		if dl := s.DeadLetter; dl != nil && isAWSTarget(dl.Target.Type) {
			set(&dl.Target.Region, &dl.Target.Endpoint)
		}
	}
	return specs
}

// isAWSTarget reports whether a target type calls AWS (and takes region
// and endpoint).
func isAWSTarget(typ string) bool {
	return config.IsAWSTarget(typ)
}
