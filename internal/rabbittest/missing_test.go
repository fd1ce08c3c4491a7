package rabbittest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// envChild makes TestChildNeedsTheManagementAPI run: it is the test
// binary run again by TestAMissingManagementAPISkipsOrFailsUnderCI.
const envChild = "PIPES_RABBITTEST_CHILD"

// TestChildNeedsTheManagementAPI is the test a fresh machine runs: two
// tests that need the management API (and through it the broker).
func TestChildNeedsTheManagementAPI(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("run by TestAMissingManagementAPISkipsOrFailsUnderCI")
	}
	for _, name := range []string{"one", "two"} {
		t.Run(name, func(t *testing.T) {
			ManagementURL(t)
			t.Log("the management API was reached")
		})
	}
}

// A machine whose broker runs without the management plugin: the tests
// that need the API skip, with one line naming the plugin (and one notice
// for the person running go test, however many tests skip); under CI=true
// they fail. A machine without a broker: they name how to start one. The
// credentials of PIPES_RABBITMQ_MANAGEMENT_URL are never printed.
//
// Relies on: nothing of the machine's broker (a listener of the test's own
// stands in for its AMQP port; the management API is a closed port).
func TestAMissingManagementAPISkipsOrFailsUnderCI(t *testing.T) {
	amqpPort, err := net.Listen("tcp", "127.0.0.1:0") // accepted by the kernel's backlog: URL only dials
	if err != nil {
		t.Fatal(err)
	}
	defer amqpPort.Close()
	closed := closedAddr(t)
	for _, tc := range []struct {
		name     string
		amqp, ci string
		wantCode int
		want     []string
	}{
		{"no management API skips, naming the plugin", amqpPort.Addr().String(), "", 0, []string{
			"--- SKIP: TestChildNeedsTheManagementAPI/one", "--- SKIP: TestChildNeedsTheManagementAPI/two",
			"RabbitMQ management API not available at http://" + closed,
			"enable it with `rabbitmq-plugins enable rabbitmq_management`", "bash .ci/run",
		}},
		{"no management API under CI=true fails", amqpPort.Addr().String(), "true", 1, []string{
			"--- FAIL: TestChildNeedsTheManagementAPI/one",
			"RabbitMQ management API not available at http://" + closed, "rabbitmq-plugins enable rabbitmq_management", "required under CI=true",
		}},
		{"no broker skips, naming how to start one", closed, "", 0, []string{
			"--- SKIP: TestChildNeedsTheManagementAPI/one", "RabbitMQ broker not available at " + closed, "apt-get install rabbitmq-server",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			notices := filepath.Join(t.TempDir(), "notices")
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildNeedsTheManagementAPI$", "-test.v", "-test.count=1")
			cmd.Env = append(withoutEnv("CI", "PIPES_RABBITMQ_URL", "PIPES_RABBITMQ_MANAGEMENT_URL", "PIPES_TEST_NOTICES"),
				envChild+"=1", "CI="+tc.ci, "PIPES_TEST_NOTICES="+notices,
				"PIPES_RABBITMQ_URL=amqp://guest:guest@"+tc.amqp+"/",
				"PIPES_RABBITMQ_MANAGEMENT_URL=http://admin:s3cr3t-pw@"+closed)
			out, _ := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q", w)
				}
			}
			if strings.Contains(string(out), "the management API was reached") {
				t.Error("a test ran without the management API")
			}
			note, _ := os.ReadFile(notices)
			if tc.ci == "" {
				lines := strings.Split(strings.TrimSpace(string(note)), "\n")
				if len(lines) != 1 || !strings.HasPrefix(lines[0], "go test ./internal/rabbittest: skipping tests: RabbitMQ ") {
					t.Errorf("notices, want one line for the package:\n%s", note)
				}
			} else if len(note) > 0 {
				t.Errorf("a notice under CI=true (the tests fail instead):\n%s", note)
			}
			if strings.Contains(string(out)+string(note), "s3cr3t-pw") {
				t.Error("the management URL's password is printed")
			}
			if t.Failed() {
				t.Logf("output:\n%s", out)
			}
		})
	}
}

// closedAddr is a loopback address that nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// withoutEnv is the process's environment less the named variables.
func withoutEnv(names ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			keep = keep && name != n
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
