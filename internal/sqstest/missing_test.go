package sqstest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// envChild makes TestChildNeedsLocalAWSSQS run: it is the test binary run
// again by TestAMissingNodeSkipsOrFailsUnderCI.
const envChild = "PIPES_SQSTEST_CHILD"

// TestChildNeedsLocalAWSSQS is the test of a machine without Node.js.
func TestChildNeedsLocalAWSSQS(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("run by TestAMissingNodeSkipsOrFailsUnderCI")
	}
	Endpoint(t)
	t.Log("the server started")
}

// A machine without Node.js (no node on PATH): a test that needs an SQS
// server skips with one line saying what provides it, and one notice for
// the person running go test; under CI=true it fails.
//
// Relies on: .ci/sqs's packages being installed (else the child would run
// npm ci, which needs npm on PATH too: it fails the same way, only later).
func TestAMissingNodeSkipsOrFailsUnderCI(t *testing.T) {
	for _, tc := range []struct {
		name, ci string
		wantCode int
		want     []string
	}{
		{"skips, naming npm", "", 0, []string{"--- SKIP: TestChildNeedsLocalAWSSQS", "the local-aws-sqs test server", "`npm ci` in .ci/sqs", "bash .ci/run"}},
		{"fails under CI=true", "true", 1, []string{"--- FAIL: TestChildNeedsLocalAWSSQS", "`npm ci` in .ci/sqs", "required under CI=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notices := filepath.Join(t.TempDir(), "notices")
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildNeedsLocalAWSSQS$", "-test.v", "-test.count=1")
			var env []string
			for _, kv := range os.Environ() {
				name, _, _ := strings.Cut(kv, "=")
				if name != "CI" && name != "PATH" && name != EnvEndpoint && name != "PIPES_TEST_NOTICES" {
					env = append(env, kv)
				}
			}
			cmd.Env = append(env, envChild+"=1", "CI="+tc.ci, "PATH="+t.TempDir(), "PIPES_TEST_NOTICES="+notices)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			note, _ := os.ReadFile(notices)
			if got := strings.Count(string(note), "\n"); (tc.ci == "") != (got == 1) || tc.ci == "" && !strings.HasPrefix(string(note), "go test ./internal/sqstest: skipping tests: the local-aws-sqs test server") {
				t.Errorf("notices:\n%s", note)
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}
