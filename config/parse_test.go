package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func parseOne(t *testing.T, yaml string) Pipe {
	t.Helper()
	ps, err := testLoader().Parse("p.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	if len(ps) != 1 {
		t.Fatalf("Parse gave %d pipes, want 1", len(ps))
	}
	return ps[0]
}

func TestDefaultsOfAMinimalFile(t *testing.T) {
	p := parseOne(t, "name: orders\nsource:\n  type: sqs\n  queue_name: orders\ntarget:\n  type: http\n  url: http://localhost:8080/x\n")
	dir, _ := filepath.Abs(".")
	want := Pipe{
		Name: "orders",
		Source: Source{
			Type: "sqs", QueueName: "orders", BatchSize: 10, MaxConcurrency: 1000,
			WaitTime: 20 * time.Second, InitialConcurrency: 5, ScaleUpPerMinute: 300, Unwrap: "none",
			Pos:      Pos{File: "p.yaml", Line: 3, Column: 3},
			QueuePos: Pos{File: "p.yaml", Line: 4, Column: 15},
		},
		Target: Target{
			Type: "http", URL: "http://localhost:8080/x", Method: "POST", Batch: true,
			Timeout: 30 * time.Second, Pos: Pos{File: "p.yaml", Line: 6, Column: 3},
			KeyPos: KeyPos{"type": {File: "p.yaml", Line: 6, Column: 9}, "url": {File: "p.yaml", Line: 7, Column: 8}},
		},
		Logging: Logging{Level: "error"},
		Pos:     Pos{File: "p.yaml", Line: 1, Column: 1},
		Dir:     dir,
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
}

func TestDecodedValues(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(Pipe) bool
	}{
		{
			name:  "a number comes from the environment before conversion",
			yaml:  "source: {type: memory, batch_size: '${N:-100}', batch_window: '${W:-2s}'}",
			check: func(p Pipe) bool { return p.Source.BatchSize == 100 && p.Source.BatchWindow == 2*time.Second },
		},
		{
			name:  "initial concurrency defaults to max concurrency when that is below 5",
			yaml:  "source: {type: memory, max_concurrency: 3}",
			check: func(p Pipe) bool { return p.Source.InitialConcurrency == 3 },
		},
		{
			name:  "a memory queue is named after its pipe",
			yaml:  "source: {type: memory}",
			check: func(p Pipe) bool { return p.Source.QueueName == "t" },
		},
		{
			name: "an empty retry_backoff takes the defaults",
			yaml: "source: {type: memory, retry_backoff: {}}",
			check: func(p Pipe) bool {
				return *p.Source.RetryBackoff == Backoff{Base: 10 * time.Second, Factor: 2, Max: 15 * time.Minute}
			},
		},
		{
			name:  "retry_backoff's default max is never below its base",
			yaml:  "source: {type: memory, retry_backoff: {base: 1h}}",
			check: func(p Pipe) bool { return p.Source.RetryBackoff.Max == time.Hour },
		},
		{
			name:  "a zero duration may be written without a unit",
			yaml:  "source: {type: memory, wait_time: 0}",
			check: func(p Pipe) bool { return p.Source.WaitTime == 0 },
		},
		{
			name: "patterns become canonical JSON with their positions",
			yaml: "source: {type: memory}\nfilter:\n  patterns:\n    - {b: [1.50], a: [\"<\", 0x10]}\n    - '{ \"z\": [true], \"a\": [null] }'\n  jq: .x\n  expr: x > 1",
			check: func(p Pipe) bool {
				f := p.Filter
				return reflect.DeepEqual(f.Patterns, []string{`{"a":["<",16],"b":[1.50]}`, `{"a":[null],"z":[true]}`}) &&
					f.PatternsPos[0] == Pos{File: "p.yaml", Line: 5, Column: 7} && f.PatternsPos[1].Line == 6 &&
					f.JQ == ".x" && f.JQPos == Pos{File: "p.yaml", Line: 7, Column: 7} &&
					f.Expr == "x > 1" && f.ExprPos.Line == 8
			},
		},
		{
			name: "an interpolated plain value in a YAML pattern is typed like YAML, a quoted one stays a string",
			yaml: "source: {type: memory}\nfilter:\n  patterns:\n    - n:\n        - ${N:-5}\n        - ${S:-x}\n      q: [\"${N:-5}\"]",
			check: func(p Pipe) bool {
				return p.Filter.Patterns[0] == `{"n":[5,"x"],"q":["5"]}`
			},
		},
		{
			name: "header values come from the environment",
			yaml: "target: {type: http, url: 'http://x/', headers: {Authorization: 'Bearer ${TOKEN}'}}",
			check: func(p Pipe) bool {
				return p.Target.Headers["Authorization"] == "Bearer s3cr3t-token"
			},
		},
		{
			name:  "a quoted boolean from the environment is fine",
			yaml:  "target: {type: stdout, batch: \"${B:-false}\"}",
			check: func(p Pipe) bool { return !p.Target.Batch },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := "name: t\n" + tt.yaml + "\n"
			if !strings.Contains(tt.yaml, "source:") {
				y += "source: {type: memory}\n"
			}
			if !strings.Contains(tt.yaml, "target:") {
				y += "target: {type: stdout}\n"
			}
			if p := parseOne(t, y); !tt.check(p) {
				t.Fatalf("unexpected pipe: %+v", p)
			}
		})
	}
}

func TestIsFIFO(t *testing.T) {
	tests := []struct {
		name string
		src  Source
		want bool
	}{
		{"a memory source with fifo set is FIFO", Source{Type: "memory", FIFO: true}, true},
		{"a memory source named .fifo without the flag is not", Source{Type: "memory", QueueName: "a.fifo"}, false},
		{"an sqs queue name ending in .fifo is FIFO", Source{Type: "sqs", QueueName: "a.fifo"}, true},
		{"an sqs queue URL ending in .fifo is FIFO", Source{Type: "sqs", QueueURL: "https://q/1/a.fifo"}, true},
		{"an sqs queue ARN ending in .fifo is FIFO", Source{Type: "sqs", QueueARN: "arn:aws:sqs:r:1:a.fifo"}, true},
		{"a standard sqs queue is not", Source{Type: "sqs", QueueName: "fifo"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.src.IsFIFO(); got != tt.want {
				t.Fatalf("IsFIFO() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Run("a folder gives its yaml files in name order", func(t *testing.T) {
		ps, err := testLoader().Load("testdata/valid")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range ps {
			names = append(names, p.Name)
		}
		if names[0] != "orders" || names[len(names)-1] != "minimal" {
			t.Fatalf("names = %v, want full.yaml's first and minimal.yaml's last", names)
		}
	})
	t.Run("a file named twice is read once", func(t *testing.T) {
		ps, err := testLoader().Load("testdata/valid/minimal.yaml", "testdata/valid", "./testdata/valid/minimal.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 11 {
			t.Fatalf("got %d pipes, want 11", len(ps))
		}
	})
	t.Run("a missing file is a filesystem error, not Errors", func(t *testing.T) {
		_, err := testLoader().Load("testdata/nope.yaml")
		var errs Errors
		if !errors.Is(err, os.ErrNotExist) || errors.As(err, &errs) {
			t.Fatalf("err = %v, want a wrapped not-exist error", err)
		}
	})
	t.Run("a folder without pipeline files is an error", func(t *testing.T) {
		if _, err := testLoader().Load(t.TempDir()); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("no path is an error", func(t *testing.T) {
		if _, err := Load(); err == nil {
			t.Fatal("no error")
		}
	})
	t.Run("each problem is an *Error that errors.As finds", func(t *testing.T) {
		_, err := testLoader().Load("testdata/invalid/out_of_range.yaml")
		var e *Error
		if !errors.As(err, &e) || e.Field != "source.batch_size" || e.Pos.Line != 5 || e.Pos.Column != 15 {
			t.Fatalf("errors.As gave %+v", e)
		}
	})
	t.Run("the process environment is used without LookupEnv", func(t *testing.T) {
		t.Setenv("PIPES_CONFIG_TEST_SIZE", "7")
		ps, err := Loader{}.Parse("p.yaml", []byte("name: a\nsource: {type: memory, batch_size: '${PIPES_CONFIG_TEST_SIZE}'}\ntarget: {type: stdout}\n"))
		if err != nil || ps[0].Source.BatchSize != 7 {
			t.Fatalf("Parse = %+v, %v", ps, err)
		}
	})
}

// TestErrorsNeverShowSecrets loads every invalid file with secret-looking
// environment values and header values, and checks none shows up.
func TestErrorsNeverShowSecrets(t *testing.T) {
	secrets := []string{"s3cr3t-token", "hunter2", "literal-header-secret"}
	inputs := map[string][]byte{}
	files, _ := filepath.Glob("testdata/invalid/*.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs[f] = data
	}
	inputs["header.yaml"] = []byte(`name: "bad name"
source: {type: sqs, queue_url: "${QUEUE_URL}", batch_size: 11}
target:
  type: http
  url: "${TOKEN}"
  timeout: "${TOKEN}"
  headers:
    Authorization: "Bearer ${TOKEN}\r"
    X-Key: "literal-header-secret\n"
    X-Other: [literal-header-secret]
`)
	for name, data := range inputs {
		_, err := testLoader().Parse(name, data)
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: error shows secret %q:\n%v", name, s, err)
			}
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, glob := range []string{"testdata/valid/*.yaml", "testdata/invalid/*.yaml", "testdata/invalid/*/*.y*ml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("name: x\nsource: {type: memory}\ntarget: {type: stdout}\nfilter: {patterns: [&p {a: [*p]}]}"))
	l := testLoader()
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := l.Parse("fuzz.yaml", data)
		if err == nil {
			if len(ps) == 0 {
				t.Fatal("no pipe and no error")
			}
			return
		}
		var errs Errors
		if !errors.As(err, &errs) || len(errs) == 0 {
			t.Fatalf("error %v is not Errors", err)
		}
		for _, e := range errs {
			if e.Pos.File != "fuzz.yaml" || e.Msg == "" {
				t.Fatalf("bad error %+v", e)
			}
			if strings.Contains(e.Error(), "s3cr3t-token") || strings.Contains(e.Error(), "hunter2") {
				t.Fatalf("error shows a secret: %v", e)
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile("testdata/valid/full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	l := testLoader()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.Parse("full.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSourceDeadLetterReadsTheFallbackKeys(t *testing.T) {
	tests := []struct {
		name           string
		keys           string
		wantX, wantKey string
		wantOK         bool
	}{
		{"no keys name no dead-letter exchange", "", "", "", false},
		{`"" alone is no dead-letter exchange, as before`, `dead_letter_exchange: ""`, "", "", false},
		{"a named exchange", "dead_letter_exchange: orders-dlx", "orders-dlx", "", true},
		{"a named exchange with a routing key", "dead_letter_exchange: orders-dlx\n  dead_letter_routing_key: dead", "orders-dlx", "dead", true},
		{"amq.default is the default exchange", "dead_letter_exchange: amq.default\n  dead_letter_routing_key: orders-dlq", "", "orders-dlq", true},
		{`"" with a routing key is the default exchange`, "dead_letter_exchange: \"\"\n  dead_letter_routing_key: orders-dlq", "", "orders-dlq", true},
		{"a routing key alone is the default exchange", "dead_letter_routing_key: orders-dlq", "", "orders-dlq", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := parseOne(t, "name: p\nsource:\n  type: rabbitmq\n  url: amqp://h/\n  queue: orders\n  "+tt.keys+"\ntarget:\n  type: stdout\n")
			x, key, ok := p.Source.DeadLetter()
			if x != tt.wantX || key != tt.wantKey || ok != tt.wantOK {
				t.Errorf("DeadLetter() = %q, %q, %v; want %q, %q, %v", x, key, ok, tt.wantX, tt.wantKey, tt.wantOK)
			}
		})
	}
	ps, err := testLoader().Parse("p.yaml", []byte("name: p\nsource:\n  type: sqs\n  queue_name: q\n  dead_letter_routing_key: k\ntarget:\n  type: stdout\n"))
	if err == nil || !strings.Contains(err.Error(), "dead_letter_routing_key: only for rabbitmq sources") {
		t.Errorf("dead_letter_routing_key on an sqs source: %v, %v", ps, err)
	}
}

func TestKeyPosLocatesEachKeyAndEntry(t *testing.T) {
	p := parseOne(t, `name: k
source: {type: memory}
enrichment:
  type: http
  url: https://e.example.com/*
  path_parameters: [$.body.id]
target:
  type: http
  url: https://x.example.com/a
  headers:
    X-Id: $.body.id
  query: {k: v}
`)
	at := func(line, col int) Pos { return Pos{File: "p.yaml", Line: line, Column: col} }
	for _, tc := range []struct {
		name  string
		keys  KeyPos
		block Pos
		key   string
		want  Pos
	}{
		{"a key is at its value", p.Target.KeyPos, p.Target.Pos, "url", at(9, 8)},
		{"a header is at its value", p.Target.KeyPos, p.Target.Pos, "headers.X-Id", at(11, 11)},
		{"a query parameter of a flow mapping is at its value", p.Target.KeyPos, p.Target.Pos, "query.k", at(12, 14)},
		{"a header the file does not have is at the headers", p.Target.KeyPos, p.Target.Pos, "headers.Other", at(11, 5)},
		{"a key the file leaves out is at the block", p.Target.KeyPos, p.Target.Pos, "partition_key", at(8, 3)},
		{"a path parameter is at its entry", p.Enrichment.KeyPos, p.Enrichment.Pos, "path_parameters[0]", at(6, 21)},
		{"a path parameter past the list is at the list", p.Enrichment.KeyPos, p.Enrichment.Pos, "path_parameters[3]", at(6, 20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.keys.At(tc.key, tc.block); got != tc.want {
				t.Errorf("At(%q) = %s, want %s", tc.key, got, tc.want)
			}
		})
	}
}
