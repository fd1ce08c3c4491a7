package enrich

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/pipesproject/pipes/internal/kit/awsclient"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// LambdaConfig configures a lambda enrichment.
type LambdaConfig struct {
	// FunctionName is the function's name, ARN or partial ARN, with an
	// optional :qualifier. Required.
	FunctionName string
	// Region is the function's region; by default the one of a function
	// ARN, else the AWS configuration's.
	Region string
	// Endpoint overrides the Lambda endpoint (a local emulator).
	Endpoint string
	// Timeout, when above 0, bounds each Invoke (SDK retries included).
	Timeout time.Duration
	// OnCall, when set, is called once for every HTTP attempt sent to
	// Lambda with the operation's name ("Invoke"). It must be safe for
	// concurrent use and quick.
	OnCall func(op string)
	// Logger receives the enrichment's logs; default: discard.
	Logger *slog.Logger
	// Template is the enrichment's input_template, rendered per event with
	// Vars; nil sends each event's payload (its SQS record).
	Template *template.Template
	// Vars are the template's reserved variables.
	Vars template.Vars
	// AWSConfig, when set, is the AWS configuration to build the client
	// from; by default config.LoadDefaultConfig. Region and Endpoint are
	// applied on top of it.
	AWSConfig *aws.Config
}

// lambdaAPI is the part of the Lambda client the enrichment calls.
type lambdaAPI interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// Lambda is the `lambda` enrichment: it invokes a function synchronously
// (RequestResponse) with the batch as a JSON array, as Pipes does, and
// hands the answer on by the same rules as HTTP (see there). A function
// error (the function threw) fails the whole batch, retryably;
// TooManyRequestsException and other throttling codes are pipe.Throttled;
// ResourceNotFound, AccessDenied and invalid-request errors are
// pipe.Permanent. Enrich blocks until the function answered; Lambda is safe
// for concurrent use.
type Lambda struct {
	api      lambdaAPI
	function string
	timeout  time.Duration
	log      *slog.Logger
	tmpl     *template.Template
	vars     template.Vars
}

var _ pipe.Enricher = (*Lambda)(nil)

// NewLambda checks cfg and builds the Lambda client. It does no network
// I/O (loading the default AWS configuration reads environment and files).
func NewLambda(ctx context.Context, cfg LambdaConfig) (*Lambda, error) {
	if cfg.FunctionName == "" {
		return nil, errors.New("configuring the lambda enrichment: function_name is required")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("configuring the lambda enrichment %s: timeout %s is negative", cfg.FunctionName, cfg.Timeout)
	}
	var awsCfg aws.Config
	if cfg.AWSConfig != nil {
		awsCfg = cfg.AWSConfig.Copy()
	} else {
		loaded, err := awsclient.Load(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("loading the AWS configuration for lambda enrichment %s: %w", cfg.FunctionName, err)
		}
		awsCfg = loaded
	}
	region := cfg.Region
	if region == "" {
		region = regionOfARN(cfg.FunctionName)
	}
	if region == "" && awsCfg.Region == "" {
		return nil, fmt.Errorf("configuring the lambda enrichment %s: no AWS region: set the enrichment's region, AWS_REGION or a profile's region", cfg.FunctionName)
	}
	client := lambda.NewFromConfig(awsCfg, func(o *lambda.Options) {
		if region != "" {
			o.Region = region
		}
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		if cfg.OnCall != nil {
			o.APIOptions = append(o.APIOptions, onCallMiddleware(cfg.OnCall))
		}
	})
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Lambda{api: client, function: cfg.FunctionName, timeout: cfg.Timeout, log: log, tmpl: cfg.Template, vars: cfg.Vars}, nil
}

// regionOfARN returns the region of a function ARN
// (arn:aws:lambda:<region>:<account>:function:<name>), "" for names.
func regionOfARN(s string) string {
	parts := strings.Split(s, ":")
	if len(parts) >= 6 && parts[0] == "arn" && parts[2] == "lambda" {
		return parts[3]
	}
	return ""
}

// onCallMiddleware calls f once per attempt (after the SDK's retries).
func onCallMiddleware(f func(string)) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("pipesOnCall",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				f(awsmiddleware.GetOperationName(ctx))
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
	}
}

// Enrich invokes the function with the events and returns what the target
// gets. A failed invocation or a malformed answer fails the whole batch.
func (l *Lambda) Enrich(ctx context.Context, events []*pipe.Event) ([]*pipe.Event, pipe.Result, error) {
	sent, bodies, res := payloads(events, l.tmpl, l.vars)
	if len(sent) == 0 {
		return nil, res, nil
	}
	out, more, err := enrichBatch(ctx, sent, bodies, l.invoke, func(n int) {
		l.log.DebugContext(ctx, "enrichment answer does not map to the batch; invoking once per event", "function", l.function, "events", n)
	})
	if err != nil {
		return nil, pipe.Result{}, fmt.Errorf("enriching %d events with lambda function %s: %w", len(sent), l.function, err)
	}
	res.Failures = append(res.Failures, more.Failures...)
	return out, res, nil
}

// invoke calls the function once with body and classifies the outcome.
func (l *Lambda) invoke(ctx context.Context, _ *pipe.Event, body []byte) ([]byte, error) {
	if l.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.timeout)
		defer cancel()
	}
	out, err := l.api.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(l.function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        body,
	})
	if err != nil {
		return nil, classifyLambda(err)
	}
	if out.FunctionError != nil {
		return nil, fmt.Errorf("the function failed (%s): %s", aws.ToString(out.FunctionError), errorSummary(out.Payload))
	}
	if len(out.Payload) > maxAnswer {
		return nil, fmt.Errorf("the answer is larger than %d bytes", maxAnswer)
	}
	return out.Payload, nil
}

// classifyLambda marks an Invoke error by what retrying can do.
func classifyLambda(err error) error {
	err = fmt.Errorf("invoking: %w", err)
	var api smithy.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode() {
		case "TooManyRequestsException", "ThrottlingException", "Throttling", "EC2ThrottledException":
			return pipe.Throttled(err)
		case "ResourceNotFoundException", "AccessDeniedException", "AccessDeniedExceptionException",
			"InvalidRequestContentException", "RequestTooLargeException", "InvalidParameterValueException",
			"UnsupportedMediaTypeException", "UnrecognizedClientException", "InvalidSignatureException":
			return pipe.Permanent(err)
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		switch status := re.HTTPStatusCode(); {
		case status == 429:
			return pipe.Throttled(err)
		case status == 408 || status >= 500:
			return err
		case status >= 400:
			return pipe.Permanent(err)
		}
	}
	return err // connection errors, timeouts: retryable
}

// maxSnippet bounds the part of a function error quoted in an error.
const maxSnippet = 256

// errorSummary quotes the start of a function error payload
// ({"errorType":…,"errorMessage":…}) on one line.
func errorSummary(payload []byte) string {
	s := strings.Join(strings.Fields(string(payload)), " ")
	if len(s) > maxSnippet {
		s = s[:maxSnippet] + "…"
	}
	return fmt.Sprintf("%q", s)
}
