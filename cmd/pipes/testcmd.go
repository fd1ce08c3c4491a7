package main

import (
	"bufio"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/internal/kit/httpcore"
	"github.com/pipesproject/pipes/internal/validation"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/memory"
	"github.com/pipesproject/pipes/target/httptarget"
)

type testFlags struct {
	files   []string
	exclude []string
	input   string
	records bool
	enrich  bool
	pipe    string
	preload bool
	awsf    awsFlags // --region, --profile, --endpoint-url (awsflags.go)
}

func newTestCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var f testFlags
	cmd := &cobra.Command{
		Use:   "test -f FILE --input EVENTS.jsonl",
		Short: "Run events through a pipe's filter and templates offline, one JSON line out per event",
		Long: `Reads events, one per line, from --input (a file, or - for standard input).
Each line is a message body (any JSON value, or raw text), wrapped in an SQS
record as the source would make it; with --records each line is a whole Pipes
SQS or RabbitMQ ("eventSource": "aws:rmq", data in base64) record instead,
used as it is. With --preload each line is in the memory source's preload
format ({"body": ..., "message_attributes": ..., "group_id": ...}) and becomes
the record a memory queue would give; that is the default when --input is the
pipe's own preload file, and --input may then be left out (the quickstart:
pipes test -f examples/quickstart/pipeline.yaml). For each event one JSON
line is written:
{"index":N,"passed":true|false,"target_input":...,"error":"..."}
where index counts events from 0 and target_input is what the target would
get (the parsed JSON when the rendered payload is JSON, else the text).
No queue or target is contacted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return testPipe(cmd.Context(), f, stdin, stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.files, "file", "f", nil, "pipeline file or folder (FOLDER/... too), walked as pipes validate does: Kubernetes manifests are skipped with a note")
	fl.StringArrayVar(&f.exclude, "exclude", nil, "leave out the files and folders whose name or path under the folder matches GLOB (*, ?, [...]; repeatable)")
	fl.StringVar(&f.input, "input", "", "events file, JSON Lines (- for standard input)")
	fl.BoolVar(&f.records, "records", false, "each input line is a whole Pipes SQS or RabbitMQ record")
	fl.BoolVar(&f.preload, "preload", false, "each input line is in the memory source's preload format (default when --input is the pipe's preload file)")
	fl.BoolVar(&f.enrich, "enrich", false, "call the pipe's enrichment too (it is contacted for real)")
	fl.StringVar(&f.pipe, "pipe", "", "the pipe to test when the files hold several")
	f.awsf.register(fl, "a lambda enrichment called with --enrich (--region is also the records' awsRegion)")
	return cmd
}

// testResult is one output line of `pipes test`.
type testResult struct {
	Index       int             `json:"index"`
	Passed      bool            `json:"passed"`
	TargetInput json.RawMessage `json:"target_input"`
	Error       string          `json:"error,omitempty"`
}

func testPipe(ctx context.Context, f testFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if err := f.awsf.check(); err != nil {
		return usageErr(err)
	}
	ctx = f.awsf.context(ctx)
	byFile, order, err := loadOffline(f.files, f.exclude, f.enrich, stderr)
	if err != nil {
		return err
	}
	for _, specs := range byFile {
		f.awsf.apply(specs)
	}
	var specs []config.Pipe
	var pairs [][2]string
	for _, file := range order {
		specs = append(specs, byFile[file]...)
		if tf := testFileFor(file); tf != "" {
			pairs = append(pairs, [2]string{file, tf})
		}
	}
	if f.input == "" && len(pairs) > 0 {
		return runTestFiles(ctx, pairs, byFile, f, stdout)
	}
	spec, err := pickPipe(specs, f.pipe)
	if err != nil {
		return usageErr(err)
	}
	if preload := preloadPath(spec); preload != "" {
		if f.input == "" {
			f.input = preload
		}
		if samePath(f.input, preload) {
			f.preload = true
		}
	}
	if f.input == "" {
		return usageErr(errors.New("--input is required (a JSON Lines file, or - for standard input), or a test file beside the pipeline file (NAME_test.yaml)"))
	}
	if f.preload && f.records {
		return usageErr(errors.New("--preload and --records are two input formats: give one"))
	}
	flt, tr, err := pipes.Stages(spec)
	if err != nil {
		return usageErr(err)
	}
	var enr pipe.Enricher
	if f.enrich {
		if enr, err = pipes.EnricherWith(ctx, spec, nil); err != nil {
			return usageErr(err)
		}
	}
	in := stdin
	if f.input != "-" {
		file, err := os.Open(f.input)
		if err != nil {
			return usageErr(fmt.Errorf("reading events: %w", err))
		}
		defer file.Close()
		in = file
	}
	secrets := testSecrets(spec)
	out := json.NewEncoder(stdout)
	if f.preload {
		msgs, err := preloadMessages(ctx, spec, f.input, in)
		if err != nil {
			return usageErr(err)
		}
		for i, msg := range msgs {
			if spec.Source.Unwrap != "none" && spec.Source.Unwrap != "" {
				source.Unwrap(msg, spec.Source.Unwrap)
			}
			res := testResult{Index: i}
			if res.Passed, res.TargetInput, err = evaluate(ctx, msg, flt, enr, tr); err != nil {
				res.Error = secrets.Redact(err.Error())
			}
			if err := out.Encode(res); err != nil {
				return runtimeErr(fmt.Errorf("writing results: %w", err))
			}
		}
		return nil
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 2<<20)
	index, bad := 0, 0
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		res := testResult{Index: index}
		msg, err := testMessage(spec, text, f.records, index)
		index++
		if err == nil && spec.Source.Unwrap != "none" && spec.Source.Unwrap != "" {
			source.Unwrap(msg, spec.Source.Unwrap)
		}
		if err != nil {
			res.Error = fmt.Sprintf("%s:%d: %v", f.input, line, err)
			bad++
		} else {
			res.Passed, res.TargetInput, err = evaluate(ctx, msg, flt, enr, tr)
			if err != nil {
				// The http enrichment scrubs its errors already; this keeps
				// any other text that could quote a header value or a URL
				// credential from being printed.
				res.Error = secrets.Redact(err.Error())
			}
		}
		if err := out.Encode(res); err != nil {
			return runtimeErr(fmt.Errorf("writing results: %w", err))
		}
	}
	if err := sc.Err(); err != nil {
		return runtimeErr(fmt.Errorf("reading events from %s: %w", f.input, err))
	}
	if bad > 0 {
		return runtimeErr(fmt.Errorf("%d event line(s) could not be read as events", bad))
	}
	return nil
}

// testSecrets are the values `pipes test` keeps out of its output, as the
// http enrichment and target keep them out of their errors: static header
// and query values, the credentials in them, the URLs' userinfo and query
// values.
func testSecrets(spec config.Pipe) *httpcore.Secrets {
	var values, urls []string
	static := func(m map[string]string) {
		for _, v := range m {
			if !httptarget.HasPlaceholder(v) {
				values = append(values, v)
			}
		}
	}
	if e := spec.Enrichment; e != nil && e.Type == "http" {
		static(e.Headers)
		urls = append(urls, e.URL)
	}
	if spec.Target.Type == "http" {
		static(spec.Target.Headers)
		static(spec.Target.Query)
		urls = append(urls, spec.Target.URL)
	}
	return httpcore.NewSecrets(values, urls...)
}

func pickPipe(specs []config.Pipe, name string) (config.Pipe, error) {
	if name == "" {
		if len(specs) == 1 {
			return specs[0], nil
		}
		names := make([]string, len(specs))
		for i, s := range specs {
			names[i] = s.Name
		}
		return config.Pipe{}, fmt.Errorf("the files hold %d pipes (%s): choose one with --pipe", len(specs), strings.Join(names, ", "))
	}
	for _, s := range specs {
		if s.Name == name {
			return s, nil
		}
	}
	return config.Pipe{}, fmt.Errorf("no pipe named %q in the files", name)
}

// testMessage makes the record of one input line.
func testMessage(spec config.Pipe, text string, records bool, n int) (*source.Message, error) {
	if records {
		var m source.Message
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return nil, fmt.Errorf("not a Pipes %s record: %w", recordKind(text), err)
		}
		if m.MessageID == "" && m.Record != nil {
			// Pipes' own RabbitMQ records have no messageId (pipes adds
			// one); such a record gets the id its source would make up.
			m.MessageID = fmt.Sprintf("pipes-test-%d", n)
			for i, f := range m.Record.Fields {
				if f.Name == "messageId" {
					m.Record.Fields[i].Value, _ = json.Marshal(m.MessageID)
				}
			}
		}
		if m.MessageID == "" {
			return nil, errors.New("not a Pipes SQS record: messageId is missing")
		}
		return &m, nil
	}
	region := spec.Source.Region
	if region == "" {
		region = "us-east-1"
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	sum := md5.Sum([]byte(text))
	return &source.Message{
		MessageID:     fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
		ReceiptHandle: fmt.Sprintf("pipes-test-receipt-%d", n),
		Body:          text,
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "1",
			"SentTimestamp":                    now,
			"SenderId":                         "pipes-test",
			"ApproximateFirstReceiveTimestamp": now,
		},
		MessageAttributes: map[string]source.MessageAttribute{},
		MD5OfBody:         hex.EncodeToString(sum[:]),
		EventSource:       "aws:sqs",
		EventSourceARN:    sourceARN(spec, region),
		AWSRegion:         region,
	}, nil
}

// recordKind names the record shape a --records line claims, for errors.
func recordKind(text string) string {
	var r struct {
		EventSource string `json:"eventSource"`
	}
	if json.Unmarshal([]byte(text), &r) == nil && r.EventSource == core.EventSourceRabbitMQ {
		return "RabbitMQ"
	}
	return "SQS"
}

// sourceARN is the queue ARN a record of the pipe's source would carry.
func sourceARN(spec config.Pipe, region string) string {
	src := spec.Source
	switch {
	case src.QueueARN != "":
		return src.QueueARN
	case src.Type == "memory":
		name := src.QueueName
		if name == "" {
			name = spec.Name
		}
		return "arn:pipes:memory:local:000000000000:" + name
	case src.QueueURL != "":
		parts := strings.Split(strings.TrimRight(src.QueueURL, "/"), "/")
		if len(parts) >= 2 {
			return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, parts[len(parts)-2], parts[len(parts)-1])
		}
	case src.QueueName != "":
		return fmt.Sprintf("arn:aws:sqs:%s:000000000000:%s", region, src.QueueName)
	}
	return "pipes:" + spec.Name + ":source"
}

// evaluate runs one message through the filter, the enrichment (when
// given) and the template. When the enrichment makes several events of the
// message, target_input is the array of what each would give the target.
func evaluate(ctx context.Context, m *source.Message, flt pipe.Filter, enr pipe.Enricher, tr pipe.Transformer) (bool, json.RawMessage, error) {
	ev, err := pipe.NewEvent(m)
	if err != nil {
		return false, nil, err
	}
	if flt != nil {
		ok, err := flt.Match(ctx, ev)
		if err != nil {
			return false, nil, fmt.Errorf("filter: %w", err)
		}
		if !ok {
			return false, nil, nil
		}
	}
	events := []*pipe.Event{ev}
	if enr != nil {
		out, res, err := enr.Enrich(ctx, events)
		if err == nil && len(res.Failures) > 0 {
			err = res.Failures[0].Err
		}
		if err != nil {
			return false, nil, fmt.Errorf("enrichment: %w", err)
		}
		if len(out) == 0 {
			return false, nil, nil // the enrichment dropped it: deleted, never delivered
		}
		events = out
	}
	var inputs []json.RawMessage
	for _, ev := range events {
		payload := ev.RecordJSON
		if tr != nil {
			payload, err = tr.Transform(ctx, ev)
			if err != nil {
				return false, nil, fmt.Errorf("input template: %w", err)
			}
		}
		in, err := asJSON(payload)
		if err != nil {
			return false, nil, err
		}
		inputs = append(inputs, in)
	}
	if len(inputs) == 1 {
		return true, inputs[0], nil
	}
	all, err := json.Marshal(inputs)
	return true, all, err
}

// asJSON is the payload itself when it is JSON, else the payload as a JSON
// string.
func asJSON(payload []byte) (json.RawMessage, error) {
	if json.Valid(payload) {
		return json.RawMessage(payload), nil
	}
	return json.Marshal(string(payload))
}

// preloadPath is the pipe's preload file as the memory source opens it
// (relative to the pipeline file's folder), "" when it has none.
func preloadPath(spec config.Pipe) string {
	p := spec.Source.Preload
	if spec.Source.Type != "memory" || p == "" {
		return ""
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(spec.Dir, p)
	}
	return p
}

// samePath reports whether a and b name the same file.
func samePath(a, b string) bool {
	if a == "-" || b == "-" {
		return false
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// preloadMessages reads a preload file (name, r) through a memory queue of
// the pipe's kind and returns its messages in order, as the memory source
// would receive them.
func preloadMessages(ctx context.Context, spec config.Pipe, name string, r io.Reader) ([]*source.Message, error) {
	qname := spec.Source.QueueName
	if qname == "" {
		qname = spec.Name
	}
	q, err := memory.NewBroker().Queue(qname, memory.Options{FIFO: spec.Source.FIFO, VisibilityTimeout: time.Hour, Region: spec.Source.Region})
	if err != nil {
		return nil, fmt.Errorf("reading preload events: %w", err)
	}
	if _, err := q.PreloadReader(ctx, name, r); err != nil {
		return nil, err
	}
	var all []*source.Message
	for {
		msgs, err := q.Receive(ctx, 10)
		if err != nil {
			return nil, fmt.Errorf("reading preload events: %w", err)
		}
		if len(msgs) == 0 {
			return all, nil
		}
		// Deleted, so that a FIFO queue hands out each group's next one.
		if err := q.Delete(ctx, msgs); err != nil {
			return nil, fmt.Errorf("reading preload events: %w", err)
		}
		all = append(all, msgs...)
	}
}

// loadOffline loads the pipes of the files (folders walked as validate
// does) for pipes test, which contacts no queue: a variable that is unset
// and has no default becomes a placeholder, except in what the test runs
// (the filter, the input template, unwrap and, with --enrich, the
// enrichment), where it is an error. Problems are printed on stderr, one a
// line, and make a usage error.
func loadOffline(args, exclude []string, enrich bool, stderr io.Writer) (map[string][]config.Pipe, []string, error) {
	if len(args) == 0 {
		return nil, nil, usageErr(errors.New("no pipeline file: give one with -f FILE"))
	}
	w, err := walkPipelineFiles(args, exclude)
	if err != nil {
		return nil, nil, usageErr(err)
	}
	files, problems := w.files, w.problems
	for _, n := range w.notes {
		fmt.Fprintln(stderr, n)
	}
	reports := config.Loader{SkipEnv: true}.Reports(files...)
	reg := pipes.NewRegistry()
	byFile := map[string][]config.Pipe{}
	n := len(problems)
	for _, p := range problems {
		fmt.Fprintln(stderr, p)
	}
	for i := range reports {
		r := &reports[i]
		r.Errors = append(r.Errors, validation.Check(reg, r)...)
		for pos, field := range r.Placeholders {
			if f := validation.PipeField(field, ""); validation.Related(f, "filter") || validation.Related(f, "target.input_template") || f == "source.unwrap" || (enrich && validation.Related(f, "enrichment")) {
				r.Errors = append(r.Errors, &config.Error{Pos: pos, Field: field,
					Msg: "uses a variable that is not set and has no default: pipes test needs those of the filter, the input template and unwrap (and the enrichment with --enrich), not the source's or the target's"})
			}
		}
		sortErrors(r.Errors)
		for _, e := range r.Errors {
			fmt.Fprintln(stderr, e)
		}
		n += len(r.Errors)
		byFile[r.File] = r.Pipes
	}
	if n > 0 {
		return nil, nil, usageErr(fmt.Errorf("%s in the pipeline files", plural(n, "problem")))
	}
	return byFile, files, nil
}
