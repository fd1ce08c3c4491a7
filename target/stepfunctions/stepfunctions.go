// Package stepfunctions is the `stepfunctions` target of pipes: it starts
// one execution of an AWS Step Functions state machine per batch, with the
// JSON array of the events' payloads as the execution's input, as
// EventBridge Pipes does.
//
// With the REQUEST_RESPONSE invocation type (the default, as in Pipes;
// express workflows only) the execution runs synchronously
// (StartSyncExecution): its output is read as a partial batch answer
// (pipe.ParseBatchResponse, SPEC.md §3), the items it names in
// batchItemFailures fail and the others succeed; an execution that failed
// or timed out fails the whole batch, retryably, with an *ExecutionError.
// With FIRE_AND_FORGET (standard or express workflows) the execution is
// started (StartExecution) and Step Functions' acceptance means the whole
// batch succeeded.
//
// Call failures are classified once, here: throttling (ThrottlingException,
// ExecutionLimitExceeded, KMS throttling) is pipe.Throttled; a missing or
// deleting state machine, an invalid ARN or input, a sync start of a
// standard workflow, access denied and any other 4xx except 408 and 429
// are pipe.Permanent; everything else (5xx, timeouts, connection errors)
// is retryable.
package stepfunctions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/batching"
	"github.com/pipesproject/pipes/internal/kit/httpcore"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
)

// Invocation types, as Pipes' StepFunctionStateMachineParameters names
// them.
const (
	// RequestResponse runs an express workflow synchronously and reads its
	// output (the default).
	RequestResponse = "REQUEST_RESPONSE"
	// FireAndForget starts an execution and does not wait for it.
	FireAndForget = "FIRE_AND_FORGET"

	// MaxInput is Step Functions' limit on an execution's input: 256 KiB
	// of UTF-8.
	MaxInput = 256 * 1024

	// maxCause bounds the execution's cause kept in an error.
	maxCause = 1024

	defaultTimeout = 30 * time.Second
)

// Config says which state machine a Target starts and how.
type Config struct {
	// StateMachineARN is the state machine's ARN. Required.
	StateMachineARN string
	// InvocationType is REQUEST_RESPONSE (default) or FIRE_AND_FORGET.
	InvocationType string
	// Region overrides the region of the AWS config; by default the AWS
	// config's, else the state machine ARN's.
	Region string
	// Endpoint overrides the Step Functions endpoint (a compatible
	// server). AWS_ENDPOINT_URL_SFN works too, through the SDK. With an
	// endpoint of either kind, StartSyncExecution goes to it as it is (no
	// "sync-" host prefix).
	Endpoint string
	// Timeout bounds each call, SDK retries included; default 30s. For
	// REQUEST_RESPONSE, give it at least the workflow's own duration.
	Timeout time.Duration
	// OnCall, when set, is called once for every HTTP attempt sent to Step
	// Functions (SDK retries included) with the operation's name,
	// "StartExecution" or "StartSyncExecution". It must be safe for
	// concurrent use and quick.
	OnCall func(operation string)
	// Logger receives the target's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
}

// sfnAPI is the part of the Step Functions client the target calls.
type sfnAPI interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	StartSyncExecution(ctx context.Context, in *sfn.StartSyncExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartSyncExecutionOutput, error)
}

// Target starts one execution per batch. It is safe for concurrent use: a
// pipe calls Deliver from many batches at once, sharing one client.
type Target struct {
	api     sfnAPI
	arn     string
	sync    bool
	timeout time.Duration
	log     *slog.Logger
}

var (
	_ pipe.Target = (*Target)(nil)
)

// ExecutionError is a synchronous execution that did not succeed: it
// failed or timed out. It fails the whole batch, retryably. ErrorCode
// makes its error the ErrorCode of a dead-lettered item.
type ExecutionError struct {
	// Status is the execution's status: FAILED or TIMED_OUT.
	Status string
	// Code is the execution's error, "" when it has none.
	Code string
	// Cause is the execution's cause, at most 1 KiB.
	Cause string
}

// Error names the status, the error and the cause.
func (e *ExecutionError) Error() string {
	s := "the execution ended " + e.Status
	if e.Code != "" {
		s += ": " + e.Code
	}
	if e.Cause != "" {
		s += ": " + e.Cause
	}
	return s
}

// ErrorCode returns the execution's error, or its status.
func (e *ExecutionError) ErrorCode() string {
	if e.Code != "" {
		return e.Code
	}
	return e.Status
}

// stateMachineARN matches state machine ARNs (any partition), with an
// optional version or alias qualifier.
var stateMachineARN = regexp.MustCompile(`^arn:aws[a-z-]*:states:[a-z0-9-]+:[0-9]{12}:stateMachine:[A-Za-z0-9_-]{1,80}(:[A-Za-z0-9_-]{1,80})?$`)

// CheckARN reports what is wrong with a state machine ARN, nil when
// nothing is. It does no I/O.
func CheckARN(arn string) error {
	switch {
	case arn == "":
		return errors.New("state machine arn is required")
	case !stateMachineARN.MatchString(arn):
		return fmt.Errorf("state machine arn %q is not a state machine ARN like arn:aws:states:us-east-1:123456789012:stateMachine:orders", arn)
	}
	return nil
}

// New checks cfg and builds the Step Functions client. It does no network
// I/O (loading the default AWS config reads environment and files only): a
// state machine that does not exist is reported by Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	var problems []error
	if err := CheckARN(cfg.StateMachineARN); err != nil {
		problems = append(problems, keyerr.New("state_machine_arn", err))
	}
	sync := true
	switch cfg.InvocationType {
	case "", RequestResponse:
	case FireAndForget:
		sync = false
	default:
		problems = append(problems, keyerr.New("invocation_type", fmt.Errorf("invocation type %q is not REQUEST_RESPONSE or FIRE_AND_FORGET", cfg.InvocationType)))
	}
	if cfg.Timeout < 0 {
		problems = append(problems, keyerr.New("timeout", fmt.Errorf("timeout %s is negative", cfg.Timeout)))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the Step Functions target %s: %w", cfg.StateMachineARN, errors.Join(problems...))
	}
	awsCfg, ov, err := awsclient.Configure(ctx, awsclient.Client{
		What: "the Step Functions target " + cfg.StateMachineARN, AWSConfig: cfg.AWSConfig,
		Region: cfg.Region, RegionGuess: awsclient.RegionFromARN(cfg.StateMachineARN),
		Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	t := &Target{arn: cfg.StateMachineARN, sync: sync, timeout: cfg.Timeout, log: cfg.Logger}
	if t.timeout == 0 {
		t.timeout = defaultTimeout
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.api = sfn.NewFromConfig(awsCfg, func(o *sfn.Options) {
		ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions)
		// Endpoint, or the SDK's own (AWS_ENDPOINT_URL_SFN, a profile's
		// endpoint_url), resolved before this function runs.
		if o.BaseEndpoint != nil {
			o.APIOptions = append(o.APIOptions, noHostPrefix)
		}
	})
	return t, nil
}

// noHostPrefix keeps StartSyncExecution's host as the endpoint gives it:
// a compatible server is at the endpoint itself, not at "sync-" + it.
func noHostPrefix(s *middleware.Stack) error {
	return s.Initialize.Add(middleware.InitializeMiddlewareFunc("pipesNoHostPrefix",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			return next.HandleInitialize(smithyhttp.DisableEndpointHostPrefix(ctx, true), in)
		}), middleware.Before)
}

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*sfn.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	return nil
}

// Deliver starts one execution with the JSON array of the events' payloads
// (a payload that is not JSON goes as a JSON string) and blocks until Step
// Functions has answered, the timeout has passed or ctx is done. An empty
// batch starts nothing.
//
// REQUEST_RESPONSE: a partial batch answer in the output fails the items
// it names; a malformed one fails the whole batch with an error wrapping
// pipe.ErrMalformedAnswer; an execution that did not succeed fails the
// whole batch with an *ExecutionError. FIRE_AND_FORGET: the start means
// success. An input over 256 KiB fails the whole batch, permanently; a
// failed call fails it with a classified error.
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	if len(events) == 0 {
		return pipe.Result{}, nil
	}
	input := batching.JSONArray(events)
	if !t.sync {
		if err := t.start(ctx, input); err != nil {
			return pipe.Result{}, fmt.Errorf("starting %s with %d events: %w", t.arn, len(events), err)
		}
		return pipe.Result{}, nil
	}
	out, err := t.Execute(ctx, input)
	if err != nil {
		return pipe.Result{}, fmt.Errorf("executing %s with %d events: %w", t.arn, len(events), err)
	}
	res, err := partial.ParseBatchResponse(out, inBatch(events))
	if err != nil {
		return pipe.Result{}, fmt.Errorf("executing %s with %d events: the execution answered: %w", t.arn, len(events), err)
	}
	return res, nil
}

// start starts an execution and does not wait for it.
func (t *Target) start(ctx context.Context, input []byte) error {
	if err := checkInput(input); err != nil {
		return err
	}
	callCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	_, err := t.api.StartExecution(callCtx, &sfn.StartExecutionInput{StateMachineArn: aws.String(t.arn), Input: aws.String(string(input))})
	return classifier.Classify(err)
}

// Execute runs the state machine synchronously (StartSyncExecution) with
// input and returns its output, whatever the target's invocation type:
// the enrichment calls it. It blocks until the execution ended, the
// timeout has passed or ctx is done; it is safe for concurrent use. An
// execution that did not succeed is an *ExecutionError (retryable); an
// input over 256 KiB is pipe.Permanent; a failed call is classified.
func (t *Target) Execute(ctx context.Context, input []byte) ([]byte, error) {
	if err := checkInput(input); err != nil {
		return nil, err
	}
	callCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	out, err := t.api.StartSyncExecution(callCtx, &sfn.StartSyncExecutionInput{StateMachineArn: aws.String(t.arn), Input: aws.String(string(input))})
	if err != nil {
		return nil, classifier.Classify(err)
	}
	if out.Status != types.SyncExecutionStatusSucceeded {
		return nil, &ExecutionError{
			Status: string(out.Status),
			Code:   httpcore.Truncate(aws.ToString(out.Error), 256),
			Cause:  httpcore.Truncate(aws.ToString(out.Cause), maxCause),
		}
	}
	return []byte(aws.ToString(out.Output)), nil
}

// checkInput refuses an input Step Functions would refuse for its size.
func checkInput(input []byte) error {
	if len(input) > MaxInput {
		return pipe.Permanent(fmt.Errorf("the input is %d bytes, over Step Functions' limit of %d: lower the source's batch_size", len(input), MaxInput))
	}
	return nil
}

// inBatch returns whether an id names an event of the batch.
func inBatch(events []*pipe.Event) func(string) bool {
	ids := make(map[string]struct{}, len(events))
	for _, ev := range events {
		ids[ev.ID()] = struct{}{}
	}
	return func(id string) bool {
		_, ok := ids[id]
		return ok
	}
}
