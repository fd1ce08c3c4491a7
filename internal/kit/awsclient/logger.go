package awsclient

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/middleware"
)

// Logger adapts l to the SDK's logger (aws.Config.Logger, a client's
// Options.Logger): the SDK's WARN lines become slog warnings, its DEBUG
// lines (request and retry logs of ClientLogMode) slog debug lines, each
// with the attribute from=aws-sdk, so they keep the format of pipes' own
// logs. It is safe for concurrent use.
func Logger(l *slog.Logger) logging.Logger {
	return sdkLogger{log: l, ctx: context.Background()}
}

type sdkLogger struct {
	log *slog.Logger
	ctx context.Context // the call's, for the handler; never used to cancel
}

var (
	_ logging.Logger        = sdkLogger{}
	_ logging.ContextLogger = sdkLogger{}
)

// Logf logs one SDK line.
func (s sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelInfo
	switch c {
	case logging.Warn:
		level = slog.LevelWarn
	case logging.Debug:
		level = slog.LevelDebug
	}
	if !s.log.Enabled(s.ctx, level) {
		return
	}
	s.log.Log(s.ctx, level, fmt.Sprintf(format, v...), "from", "aws-sdk")
}

// WithContext passes the call's context to the handler.
func (s sdkLogger) WithContext(ctx context.Context) logging.Logger {
	return sdkLogger{log: s.log, ctx: ctx}
}

// setLogger is an initialize middleware that, placed after the SDK's
// SetLogger, makes l the logger of the operation.
func setLogger(l logging.Logger) func(*middleware.Stack) error {
	return func(s *middleware.Stack) error {
		return s.Initialize.Add(middleware.InitializeMiddlewareFunc("pipesSetLogger",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				return next.HandleInitialize(middleware.SetLogger(ctx, l), in)
			}), middleware.After)
	}
}
