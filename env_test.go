package pipes

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// An Env without a Logger logs text to standard error at info level: an
// embedder who leaves it out still sees failures.
func TestANilLoggerLogsToStandardErrorAtInfo(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	e := &Env{}
	e.defaults()
	os.Stderr = stderr
	if e.Logger.Enabled(context.Background(), slog.LevelDebug) || !e.Logger.Enabled(context.Background(), slog.LevelInfo) {
		t.Error("the default logger is not at info level")
	}
	e.Logger.Error("delivering a batch failed", "pipe", "orders")
	w.Close()
	out, _ := io.ReadAll(r)
	if !strings.Contains(string(out), `level=ERROR msg="delivering a batch failed" pipe=orders`) {
		t.Errorf("standard error got %q, want the failure as a text line", out)
	}
}
