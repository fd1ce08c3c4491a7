// Package lambdatarget is the `lambda` target of pipes: it invokes an AWS
// Lambda function once per batch with the JSON array of the events'
// payloads, as EventBridge Pipes does.
//
// With the RequestResponse invocation type (the default) the function's
// answer is read as a partial batch answer (pipe.ParseBatchResponse,
// SPEC.md §3): items it names in batchItemFailures fail, the others
// succeed; an answer that breaks the contract fails the whole batch, and so
// does a function error (the X-Amz-Function-Error answer), retryably, with
// the function's error message. With the Event invocation type the function
// is invoked asynchronously: Lambda's 202 means the whole batch succeeded.
//
// Call failures are classified once, here: throttling
// (TooManyRequestsException) is pipe.Throttled; a missing function, access
// denied, invalid request content, a request too large and any other 4xx
// except 408, 409 (the function is being updated) and 429 are
// pipe.Permanent; everything else (5xx, timeouts, connection errors) is
// retryable.
package lambdatarget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/internal/kit/batching"
	"github.com/pipesproject/pipes/internal/kit/httpcore"
	"github.com/pipesproject/pipes/internal/kit/partial"
	"github.com/pipesproject/pipes/pipe"
)

// Invocation types.
const (
	// RequestResponse invokes the function synchronously and reads its
	// answer (the default).
	RequestResponse = "RequestResponse"
	// Event invokes the function asynchronously (fire and forget).
	Event = "Event"

	// maxFunctionError bounds the function error message kept (Lambda's
	// asynchronous DLQ keeps 1 KB).
	maxFunctionError = 1024

	defaultTimeout = 30 * time.Second
)

// Config says which function a Target invokes and how.
type Config struct {
	// FunctionName is the function's name, ARN or partial ARN, with an
	// optional ":alias" or ":version" qualifier. Required.
	FunctionName string
	// InvocationType is RequestResponse (default) or Event.
	InvocationType string
	// Region overrides the region of the AWS config; by default the AWS
	// config's, else a function ARN's.
	Region string
	// Endpoint overrides the Lambda endpoint (a Lambda-compatible server).
	// AWS_ENDPOINT_URL_LAMBDA works too, through the SDK.
	Endpoint string
	// Timeout bounds each invocation, SDK retries included; default 30s.
	// For RequestResponse, give it at least the function's own timeout.
	Timeout time.Duration
	// OnCall, when set, is called once for every HTTP attempt sent to
	// Lambda (SDK retries included) with the operation's name, here
	// "Invoke". It must be safe for concurrent use and quick.
	OnCall func(operation string)
	// Logger receives the target's logs; nil discards them.
	Logger *slog.Logger
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig (env, profile, IMDS, IRSA).
	// Region and Endpoint above are applied on top of it.
	AWSConfig *aws.Config
}

// lambdaAPI is the part of the Lambda client the target calls.
type lambdaAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Target invokes one Lambda function per batch. It is safe for concurrent
// use: a pipe calls Deliver from many batches at once, sharing one client.
type Target struct {
	api      lambdaAPI
	function string
	invoke   types.InvocationType
	timeout  time.Duration
	log      *slog.Logger
}

var (
	_ pipe.Target = (*Target)(nil)
)

// FunctionError is a function's own failure: Lambda ran it and it threw or
// returned an error (the X-Amz-Function-Error answer). It fails the whole
// batch, retryably. ErrorCode makes its type the ErrorCode of a
// dead-lettered item.
type FunctionError struct {
	// Kind is X-Amz-Function-Error: "Unhandled" or "Handled".
	Kind string
	// Type is the errorType of the function's answer, "" when it has none.
	Type string
	// Message is the errorMessage of the function's answer, or the answer
	// itself when it has no errorMessage, at most 1 KB.
	Message string
}

// Error names the kind, the type and the message.
func (e *FunctionError) Error() string {
	s := "function error (" + e.Kind + ")"
	if e.Type != "" {
		s += " " + e.Type
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// ErrorCode returns the function's error type, or "FunctionError".
func (e *FunctionError) ErrorCode() string {
	if e.Type != "" {
		return e.Type
	}
	return "FunctionError"
}

// New checks cfg and builds the Lambda client. It does no network I/O
// (loading the default AWS config reads environment and files only): a
// function that does not exist is reported by Deliver.
func New(ctx context.Context, cfg Config) (*Target, error) {
	var problems []error
	if cfg.FunctionName == "" {
		problems = append(problems, keyerr.New("function_name", errors.New("function name is required")))
	}
	invoke := types.InvocationTypeRequestResponse
	switch cfg.InvocationType {
	case "", RequestResponse:
	case Event:
		invoke = types.InvocationTypeEvent
	default:
		problems = append(problems, keyerr.New("invocation_type", fmt.Errorf("invocation type %q is not RequestResponse or Event", cfg.InvocationType)))
	}
	if cfg.Timeout < 0 {
		problems = append(problems, keyerr.New("timeout", fmt.Errorf("timeout %s is negative", cfg.Timeout)))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring the Lambda target %s: %w", cfg.FunctionName, errors.Join(problems...))
	}
	awsCfg, ov, err := awsclient.Configure(ctx, awsclient.Client{
		What: "the Lambda target " + cfg.FunctionName, AWSConfig: cfg.AWSConfig,
		Region: cfg.Region, RegionGuess: awsclient.RegionFromARN(cfg.FunctionName),
		Endpoint: cfg.Endpoint, OnCall: cfg.OnCall, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	t := &Target{function: cfg.FunctionName, invoke: invoke, timeout: cfg.Timeout, log: cfg.Logger}
	if t.timeout == 0 {
		t.timeout = defaultTimeout
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	t.api = lambda.NewFromConfig(awsCfg, func(o *lambda.Options) { ov.Apply(&o.Region, &o.BaseEndpoint, &o.APIOptions) })
	return t, nil
}

// Close releases the idle connections of the client's HTTP client. It does
// not wait for deliveries in flight; call it once the pipe has stopped.
func (t *Target) Close(context.Context) error {
	if c, ok := t.api.(*lambda.Client); ok {
		awsclient.CloseIdleConnections(c.Options().HTTPClient)
	}
	return nil
}

// Deliver invokes the function once with the JSON array of the events'
// payloads (a payload that is not JSON goes as a JSON string) and blocks
// until Lambda has answered, the timeout has passed or ctx is done. An
// empty batch invokes nothing.
//
// RequestResponse: a partial batch answer fails the items it names; a
// malformed one fails the whole batch with an error wrapping
// pipe.ErrMalformedAnswer; a function error fails the whole batch with a
// *FunctionError. Event: Lambda's acceptance means success. A failed call
// fails the whole batch with a classified error.
func (t *Target) Deliver(ctx context.Context, events []*pipe.Event) (pipe.Result, error) {
	if len(events) == 0 {
		return pipe.Result{}, nil
	}
	callCtx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	out, err := t.api.Invoke(callCtx, &lambda.InvokeInput{
		FunctionName:   aws.String(t.function),
		InvocationType: t.invoke,
		Payload:        batchPayload(events),
	})
	if err != nil {
		return pipe.Result{}, fmt.Errorf("invoking %s with %d events: %w", t.function, len(events), classifier.Classify(err))
	}
	if t.invoke == types.InvocationTypeEvent {
		return pipe.Result{}, nil
	}
	if kind := aws.ToString(out.FunctionError); kind != "" {
		return pipe.Result{}, fmt.Errorf("invoking %s with %d events: %w", t.function, len(events), functionError(kind, out.Payload))
	}
	res, err := partial.ParseBatchResponse(out.Payload, inBatch(events))
	if err != nil {
		return pipe.Result{}, fmt.Errorf("invoking %s with %d events: the function answered: %w", t.function, len(events), err)
	}
	return res, nil
}

// batchPayload is the JSON array of the events' payloads.
func batchPayload(events []*pipe.Event) []byte { return batching.JSONArray(events) }

// functionError reads a function error answer: {"errorType", "errorMessage",
// …} in Lambda's runtimes, or anything else, quoted.
func functionError(kind string, payload []byte) *FunctionError {
	e := &FunctionError{Kind: kind}
	var answer struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if err := json.Unmarshal(payload, &answer); err == nil && (answer.ErrorType != "" || answer.ErrorMessage != "") {
		e.Type, e.Message = answer.ErrorType, answer.ErrorMessage
	} else {
		e.Message = string(payload)
	}
	e.Type = httpcore.Truncate(e.Type, 256)
	e.Message = httpcore.Truncate(e.Message, maxFunctionError)
	return e
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
