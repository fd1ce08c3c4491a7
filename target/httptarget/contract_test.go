package httptarget_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/target/httptarget"
	"github.com/pipesproject/pipes/target/targettest"
)

// TestContract runs the target contract suite against a real HTTP server
// that keeps every request body; one request per event (Batch false), so
// each body is one payload as it was.
func TestContract(t *testing.T) {
	targettest.Run(t, targettest.Harness{
		New: func(t *testing.T) (pipe.Target, targettest.Inspect) {
			var (
				mu     sync.Mutex
				bodies [][]byte
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					w.WriteHeader(http.StatusBadRequest)
					return
				}
				mu.Lock()
				bodies = append(bodies, b)
				mu.Unlock()
				w.WriteHeader(http.StatusOK)
			}))
			t.Cleanup(srv.Close)
			tg := newTarget(t, httptarget.Config{URL: srv.URL, Timeout: 10 * time.Second})
			return tg, func(t *testing.T) [][]byte {
				mu.Lock()
				defer mu.Unlock()
				out := make([][]byte, len(bodies))
				for i, b := range bodies {
					out[i] = bytes.Clone(b)
				}
				return out
			}
		},
		Quiet: 50 * time.Millisecond,
	})
}
