package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden .err files of testdata/invalid")

// testEnv is the environment the testdata files are loaded with.
var testEnv = map[string]string{
	"QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/orders",
	"TOKEN":     "s3cr3t-token",
	"SECRET":    "hunter2",
	"EMPTY":     "",
}

func testLoader() Loader {
	return Loader{LookupEnv: func(name string) (string, bool) {
		v, ok := testEnv[name]
		return v, ok
	}}
}

func TestEveryValidFileLoads(t *testing.T) {
	files, err := filepath.Glob("testdata/valid/*.y*ml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			ps, err := testLoader().Load(f)
			if err != nil {
				t.Fatalf("loading %s:\n%v", f, err)
			}
			if len(ps) == 0 {
				t.Fatalf("%s holds no pipe", f)
			}
		})
	}
}

// TestEveryInvalidFileGivesItsGoldenErrors loads each file (or folder) of
// testdata/invalid and compares the error text with <name>.err. Run with
// -update to rewrite the .err files, then read the diff.
func TestEveryInvalidFileGivesItsGoldenErrors(t *testing.T) {
	entries, err := os.ReadDir("testdata/invalid")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".err") {
			continue
		}
		n++
		path := filepath.Join("testdata", "invalid", e.Name())
		golden := strings.TrimSuffix(path, filepath.Ext(path)) + ".err"
		t.Run(e.Name(), func(t *testing.T) {
			_, err := testLoader().Load(path)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("Load(%s) = %v, want Errors", path, err)
			}
			got := err.Error() + "\n"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden file (run go test -update): %v", err)
			}
			if got != string(want) {
				t.Errorf("errors of %s:\n%s\nwant (%s):\n%s", path, got, golden, want)
			}
		})
	}
	if n == 0 {
		t.Fatal("no invalid testdata")
	}
}
