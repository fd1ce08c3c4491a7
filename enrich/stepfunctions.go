package enrich

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/target/stepfunctions"
	"github.com/pipesproject/pipes/template"
)

// StepFunctionsConfig configures a stepfunctions enrichment.
type StepFunctionsConfig struct {
	// StateMachineARN is the ARN of an EXPRESS state machine. Required.
	StateMachineARN string
	// Region is the state machine's region; by default the AWS
	// configuration's, else the ARN's.
	Region string
	// Endpoint overrides the Step Functions endpoint (a compatible
	// server).
	Endpoint string
	// Timeout, when above 0, bounds each StartSyncExecution (SDK retries
	// included); default 30s.
	Timeout time.Duration
	// OnCall, when set, is called once for every HTTP attempt sent to Step
	// Functions with the operation's name ("StartSyncExecution"). It must
	// be safe for concurrent use and quick.
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

// StepFunctions is the `stepfunctions` enrichment: it runs an express
// state machine synchronously (StartSyncExecution) with the batch as a
// JSON array, as Pipes does, and hands its output on by the same rules as
// HTTP and Lambda (see there). An execution that failed or timed out fails
// the whole batch, retryably (a *stepfunctions.ExecutionError);
// ThrottlingException and ExecutionLimitExceeded are pipe.Throttled; a
// missing state machine, a standard workflow, access denied and invalid
// input are pipe.Permanent. Enrich blocks until the execution ended;
// StepFunctions is safe for concurrent use.
type StepFunctions struct {
	sm   *stepfunctions.Target
	arn  string
	log  *slog.Logger
	tmpl *template.Template
	vars template.Vars
}

var (
	_ pipe.Enricher = (*StepFunctions)(nil)
)

// NewStepFunctions checks cfg and builds the Step Functions client. It
// does no network I/O (loading the default AWS configuration reads
// environment and files).
func NewStepFunctions(ctx context.Context, cfg StepFunctionsConfig) (*StepFunctions, error) {
	if cfg.StateMachineARN == "" {
		return nil, errors.New("configuring the stepfunctions enrichment: state_machine_arn is required")
	}
	if err := stepfunctions.CheckARN(cfg.StateMachineARN); err != nil {
		return nil, fmt.Errorf("configuring the stepfunctions enrichment: %w", err)
	}
	sm, err := stepfunctions.New(ctx, stepfunctions.Config{
		StateMachineARN: cfg.StateMachineARN, InvocationType: stepfunctions.RequestResponse,
		Region: cfg.Region, Endpoint: cfg.Endpoint, Timeout: cfg.Timeout,
		OnCall: cfg.OnCall, Logger: cfg.Logger, AWSConfig: cfg.AWSConfig,
	})
	if err != nil {
		return nil, fmt.Errorf("configuring the stepfunctions enrichment: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &StepFunctions{sm: sm, arn: cfg.StateMachineARN, log: log, tmpl: cfg.Template, vars: cfg.Vars}, nil
}

// Close releases the client's idle connections.
func (s *StepFunctions) Close(ctx context.Context) error { return s.sm.Close(ctx) }

// Enrich runs the state machine with the events and returns what the
// target gets. A failed execution or a malformed output fails the whole
// batch.
func (s *StepFunctions) Enrich(ctx context.Context, events []*pipe.Event) ([]*pipe.Event, pipe.Result, error) {
	sent, bodies, res := payloads(events, s.tmpl, s.vars)
	if len(sent) == 0 {
		return nil, res, nil
	}
	out, more, err := enrichBatch(ctx, sent, bodies, s.invoke, func(n int) {
		s.log.DebugContext(ctx, "enrichment output does not map to the batch; executing once per event", "state_machine", s.arn, "events", n)
	})
	if err != nil {
		return nil, pipe.Result{}, fmt.Errorf("enriching %d events with state machine %s: %w", len(sent), s.arn, err)
	}
	res.Failures = append(res.Failures, more.Failures...)
	return out, res, nil
}

// invoke runs one execution with body.
func (s *StepFunctions) invoke(ctx context.Context, _ *pipe.Event, body []byte) ([]byte, error) {
	out, err := s.sm.Execute(ctx, body)
	if err != nil {
		return nil, err
	}
	if len(out) > maxAnswer {
		return nil, fmt.Errorf("the output is larger than %d bytes", maxAnswer)
	}
	return out, nil
}
