// Command pipes runs event pipelines described in YAML files: it long-polls
// queues in batches, filters, enriches and hands batches to targets, the way
// Amazon EventBridge Pipes does, on your own machines.
//
// Exit codes: 0 ok, 1 runtime failure, 2 bad usage or invalid configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error   { return &exitError{code: 2, err: err} }
func runtimeErr(err error) error { return &exitError{code: 1, err: err} }

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	in := newInterrupts(cancel, os.Exit, os.Stderr)
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		in.watch(sigs)
	}()
	code := execute(ctx, in, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	signal.Stop(sigs)
	close(sigs)
	<-watched
	cancel()
	os.Exit(code)
}

// run executes the CLI with args and returns the exit code. It handles
// no signals: ctx alone stops it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return execute(ctx, nil, args, stdin, stdout, stderr)
}

// execute executes the CLI with args and returns the exit code; in, when
// not nil, is how the signals of main reach the commands.
func execute(ctx context.Context, in *interrupts, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(in, stdin, stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, ee.err)
		}
		return ee.code
	}
	// cobra's own errors: unknown command or flag.
	fmt.Fprintln(stderr, "pipes:", err)
	return 2
}

func newRoot(in *interrupts, stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "pipes",
		Short:         "Run event pipelines from queues to targets, the way EventBridge Pipes does",
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(newRunCmd(in, stdout, stderr), newValidateCmd(stdout, stderr), newTestCmd(stdin, stdout, stderr), newSendCmd(stdin, stdout, stderr), newSchemaCmd(stdout), newDLQCmd(stdout, stderr), newVersionCmd(stdout), newImportCmd(stdin, stdout, stderr), newTopCmd(stdin, stdout))
	completeFlags(root)
	return root
}

// flagValues are the values shell completion offers for the flags that
// take one of a few words, on every command that has them.
var flagValues = map[string][]string{
	"log-format": {"text\tkey=value lines", "json\tJSON lines"},
	"log-level":  {"debug", "info", "warn", "error"},
}

// completeFlags makes shell completion (pipes completion bash|zsh|fish|
// powershell) offer the values of flagValues, and pipeline files (*.yaml,
// *.yml, and folders) after -f, on cmd and every command under it.
func completeFlags(cmd *cobra.Command) {
	for name, values := range flagValues {
		if cmd.Flags().Lookup(name) != nil {
			_ = cmd.RegisterFlagCompletionFunc(name, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
		}
	}
	if cmd.Flags().Lookup("file") != nil {
		_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	}
	for _, sub := range cmd.Commands() {
		completeFlags(sub)
	}
}

// interrupts turns SIGINT and SIGTERM into a stop in three steps: the
// first cancels the commands' context (`pipes run` stops polling and gives
// in-flight batches --shutdown-timeout), the second cuts the stop short
// (the abort function the run command set), the third exits the process
// at once with code 1. Each step is logged. A nil *interrupts does
// nothing. Its methods are safe for concurrent use and do not block.
type interrupts struct {
	cancel context.CancelFunc
	exit   func(code int)

	mu       sync.Mutex
	count    int          // signals so far
	log      *slog.Logger // the run command's logger, or one on stderr
	stopping string       // what the first signal does, for the log
	timeout  time.Duration
	abort    func() // set by the run command; nil before and after
	aborted  bool   // a second signal came
}

func newInterrupts(cancel context.CancelFunc, exit func(int), stderr io.Writer) *interrupts {
	return &interrupts{
		cancel:   cancel,
		exit:     exit,
		log:      slog.New(slog.NewTextHandler(stderr, nil)),
		stopping: "signal received, stopping",
	}
}

// watch handles the signals of sigs until it is closed.
func (in *interrupts) watch(sigs <-chan os.Signal) {
	for sig := range sigs {
		in.handle(sig)
	}
}

// handle takes one more signal.
func (in *interrupts) handle(sig os.Signal) {
	in.mu.Lock()
	in.count++
	n, log := in.count, in.log
	var abort func()
	if n == 2 {
		in.aborted = true
		abort = in.abort
	}
	stopping, timeout := in.stopping, in.timeout
	in.mu.Unlock()
	switch n {
	case 1:
		if timeout > 0 {
			log.Info(stopping, "signal", sig.String(), "shutdown_timeout", timeout.String())
		} else {
			log.Info(stopping, "signal", sig.String())
		}
		in.cancel()
	case 2:
		log.Warn("second signal received, stopping now: target calls and receives are cancelled, unfinished messages released; a third signal exits at once",
			"signal", sig.String())
		if abort != nil {
			abort()
		}
	default:
		log.Error("third signal received, exiting at once with code 1", "signal", sig.String())
		in.exit(1)
	}
}

// runStarted tells the signals the run command's logger, its shutdown
// timeout and how to cut its stop short; abort is called at once if a
// second signal came already. runEnded undoes it.
func (in *interrupts) runStarted(log *slog.Logger, shutdownTimeout time.Duration, abort func()) {
	if in == nil {
		return
	}
	in.mu.Lock()
	in.log = log
	in.stopping = "signal received, stopping: polling stops, in-flight batches get --shutdown-timeout"
	in.timeout = shutdownTimeout
	in.abort = abort
	aborted := in.aborted
	in.mu.Unlock()
	if aborted {
		abort()
	}
}

// runEnded forgets the run command's abort function.
func (in *interrupts) runEnded() {
	if in == nil {
		return
	}
	in.mu.Lock()
	in.abort = nil
	in.mu.Unlock()
}
