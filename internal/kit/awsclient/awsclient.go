// Package awsclient builds the AWS SDK clients of pipes' SQS source and AWS
// targets the same way: an aws.Config loaded once, a region, an endpoint
// and the OnCall counting middleware applied on top of it, and the failed
// calls classified into pipe.Throttled, pipe.Permanent or retryable.
package awsclient

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"
)

// Load returns a copy of cfg, or, when cfg is nil, the default AWS
// configuration (config.LoadDefaultConfig: env, profile, IMDS, IRSA). It
// does no network I/O; its error is the SDK's, for the caller to wrap.
//
// When the default configuration finds no credentials but the EC2
// instance role, calls that cannot get that role's credentials fail with
// a pipe.Permanent *CredentialsError saying what to set, instead of the
// SDK's "failed to refresh cached credentials, no EC2 IMDS role found".
//
// A profile given to ctx with WithProfile is loaded as AWS_PROFILE would
// name it.
func Load(ctx context.Context, cfg *aws.Config) (aws.Config, error) {
	if cfg != nil {
		return cfg.Copy(), nil
	}
	var opts []func(*awsconfig.LoadOptions) error
	if p := Profile(ctx); p != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(p))
	}
	c, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return c, err
	}
	explainMissingCredentials(&c)
	return c, nil
}

// profileKey is the context key of WithProfile.
type profileKey struct{}

// WithProfile returns a context whose AWS clients, loaded by Load with no
// configuration of their own, use the shared config profile (the CLI's
// --profile, over AWS_PROFILE); "" returns ctx as it is.
func WithProfile(ctx context.Context, profile string) context.Context {
	if profile == "" {
		return ctx
	}
	return context.WithValue(ctx, profileKey{}, profile)
}

// Profile is the profile WithProfile gave ctx, "" when none.
func Profile(ctx context.Context) string {
	p, _ := ctx.Value(profileKey{}).(string)
	return p
}

// Region returns the region to build a client with: override when set,
// else guess when awsCfg has no region of its own ("" keeps awsCfg's). ok
// is false when neither they nor awsCfg give a region.
func Region(awsCfg aws.Config, override, guess string) (region string, ok bool) {
	region = override
	if region == "" && awsCfg.Region == "" {
		region = guess
	}
	return region, region != "" || awsCfg.Region != ""
}

// Overrides are what pipes sets on a client's options on top of its
// aws.Config.
type Overrides struct {
	// Region, when not empty, replaces the config's region.
	Region string
	// Endpoint, when not empty, is the client's base endpoint (a
	// compatible server).
	Endpoint string
	// OnCall, when set, is called once per HTTP attempt (see OnCall).
	OnCall func(operation string)
	// Logger, when set, receives the SDK's own log lines (see Logger)
	// instead of the config's logger (by default, plain text on stderr).
	Logger *slog.Logger
}

// Apply sets the overrides on the fields every service's Options has:
// Region, BaseEndpoint and APIOptions (OnCall, and Logger as the logger of
// every operation). Call it from the options function given to the
// service's NewFromConfig.
func (ov Overrides) Apply(region *string, baseEndpoint **string, apiOptions *[]func(*middleware.Stack) error) {
	if ov.Region != "" {
		*region = ov.Region
	}
	if ov.Endpoint != "" {
		*baseEndpoint = aws.String(ov.Endpoint)
	}
	if ov.OnCall != nil {
		*apiOptions = append(*apiOptions, OnCall(ov.OnCall))
	}
	if ov.Logger != nil {
		*apiOptions = append(*apiOptions, setLogger(Logger(ov.Logger)))
	}
}

// OnCall returns a middleware that calls f once per attempt with the
// operation's name: it sits in the finalize step after the SDK's retry
// middleware, so every retry passes through it. f must be safe for
// concurrent use and quick.
func OnCall(f func(operation string)) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("pipesOnCall",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				f(awsmiddleware.GetOperationName(ctx))
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

// CloseIdleConnections releases the idle connections of a client's HTTP
// client (its Options().HTTPClient) when it can.
func CloseIdleConnections(httpClient any) {
	if h, ok := httpClient.(interface{ CloseIdleConnections() }); ok {
		h.CloseIdleConnections()
	}
}

// Client says how a target builds its AWS SDK client: Configure turns it
// into the aws.Config and the Overrides to build the service's client
// from.
type Client struct {
	// What names the target in errors: "the Kinesis target orders".
	What string
	// AWSConfig is the configuration to start from; nil loads the default
	// (see Load).
	AWSConfig *aws.Config
	// Region overrides the configuration's; RegionGuess is used when the
	// configuration has none (a resource ARN's region).
	Region, RegionGuess string
	// Endpoint, OnCall and Logger are the Overrides'.
	Endpoint string
	OnCall   func(operation string)
	Logger   *slog.Logger
}

// Configure loads c's AWS configuration and picks its region. It does no
// network I/O. Its errors say what c.What was doing.
func Configure(ctx context.Context, c Client) (aws.Config, Overrides, error) {
	awsCfg, err := Load(ctx, c.AWSConfig)
	if err != nil {
		return aws.Config{}, Overrides{}, fmt.Errorf("loading the AWS configuration for %s: %w", c.What, err)
	}
	region, ok := Region(awsCfg, c.Region, c.RegionGuess)
	if !ok {
		return aws.Config{}, Overrides{}, fmt.Errorf("configuring %s: no AWS region: set the target's region, AWS_REGION or a profile's region", c.What)
	}
	return awsCfg, Overrides{Region: region, Endpoint: c.Endpoint, OnCall: c.OnCall, Logger: c.Logger}, nil
}
