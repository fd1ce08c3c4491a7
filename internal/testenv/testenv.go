// Package testenv is how pipes' test helpers say that a service a test
// needs (the RabbitMQ broker, its management API, the npm SQS servers,
// chromium) is missing from the machine: the test is skipped with one line
// naming the service and the command that provides it, or fails under
// CI=true, where every service must be there (`bash .ci/run` sets them
// all up).
//
// `go test ./...` prints nothing but "ok" of a package whose tests pass or
// skip, so Missing also tells whoever runs the tests, once per test binary
// and service, on their terminal: "go test ./source/rabbitmq: skipping
// tests: RabbitMQ management API not available at …". Where there is no
// terminal (CI, an editor) the line goes to the test binary's standard
// error, which `go test -v` shows. PIPES_TEST_NOTICES names another file
// to append the lines to.
package testenv

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// EnvNotices names the environment variable that gives the file the
// once-per-binary notices are appended to (default: the terminal,
// /dev/tty, else standard error).
const EnvNotices = "PIPES_TEST_NOTICES"

// Service is a service of the machine that tests need.
type Service struct {
	// Name says what it is: "RabbitMQ management API".
	Name string
	// At is where it was looked for (a URL without credentials, a path);
	// "" when there is no one place.
	At string
	// Fix says what provides it, with the command: "enable it with
	// `rabbitmq-plugins enable rabbitmq_management`".
	Fix string
}

// Line is the one line that says s is missing and why: "RabbitMQ
// management API not available at http://127.0.0.1:15672 (… connection
// refused); enable it with `rabbitmq-plugins enable rabbitmq_management`
// (bash .ci/run sets up every service)". err must hold no secret.
func (s Service) Line(err error) string {
	var b strings.Builder
	b.WriteString(s.Name)
	b.WriteString(" not available")
	if s.At != "" {
		b.WriteString(" at ")
		b.WriteString(s.At)
	}
	if err != nil {
		b.WriteString(" (")
		b.WriteString(strings.ReplaceAll(err.Error(), "\n", " "))
		b.WriteString(")")
	}
	b.WriteString("; ")
	b.WriteString(s.Fix)
	b.WriteString(" (bash .ci/run sets up every service)")
	return b.String()
}

// noticed holds the services this test binary already told the terminal
// about: one line each, however many tests skip for it. It is test-binary
// state, as the servers sqstest starts are.
var noticed sync.Map // Service.Name → struct{}

// Missing skips t because s is missing (err says how it was found
// missing; it must hold no secret), or fails t under CI=true. Either way
// it does not return. It is safe for concurrent use.
func Missing(t testing.TB, s Service, err error) {
	t.Helper()
	line := s.Line(err)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; it is required under CI=true", line)
	}
	if _, seen := noticed.LoadOrStore(s.Name, struct{}{}); !seen {
		notice("go test " + packageDir() + ": skipping tests: " + line)
	}
	t.Skip(line)
}

// notice writes one line where whoever runs the tests sees it.
func notice(line string) {
	line += "\n"
	if name := os.Getenv(EnvNotices); name != "" {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			_, err = f.WriteString(line)
			err = errors.Join(err, f.Close())
		}
		if err == nil {
			return
		}
	} else if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		_, err = tty.WriteString(line)
		if tty.Close() == nil && err == nil {
			return
		}
	}
	fmt.Fprint(os.Stderr, line)
}

// packageDir is the test binary's package as a path from the module's
// root ("./source/rabbitmq"): go test runs a test binary in its package's
// folder.
func packageDir() string {
	wd, err := os.Getwd()
	if err != nil {
		return "(unknown package)"
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, wd)
			if err != nil || rel == "." {
				return "."
			}
			return "./" + filepath.ToSlash(rel)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
}

// DefaultParallel sets -test.parallel to n unless the command line gave it,
// for a TestMain whose parallel tests mostly wait (on a queue, a broker or
// a child process), so that more of them than the machine has cores
// overlap their waits. It parses the flags; call it before m.Run.
func DefaultParallel(n int) error {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		return nil
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		return fmt.Errorf("setting -test.parallel: %w", err)
	}
	return nil
}
