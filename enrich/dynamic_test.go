package enrich_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pipesproject/pipes/enrich"
	"github.com/pipesproject/pipes/internal/core"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/template"
)

// recorder is a real net/http server that records each request's path,
// query and X-Id / X-Static headers, and answers with the body it got, so
// that the enrichment hands each payload on (a batch's array maps by
// position).
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rec.mu.Lock()
	rec.seen = append(rec.seen, r.URL.EscapedPath()+"?"+r.URL.RawQuery+" id="+r.Header.Get("X-Id")+" static="+r.Header.Get("X-Static"))
	rec.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (rec *recorder) requests() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := slices.Clone(rec.seen)
	slices.Sort(out)
	return out
}

// Header, query and path parameters of an http enrichment may come from
// the record, as the http target's do: a bare JSON path (Pipes' dynamic
// path parameter) and a <$.path> placeholder alike; path_parameters fill
// the URL's `*` in order. With batch, the batch's first record gives them.
func TestHTTPEnrichmentRendersDynamicParametersPerRecord(t *testing.T) {
	tests := []struct {
		name   string
		batch  bool
		url    string
		path   []string
		header string
		query  map[string]string
		want   []string
	}{
		{
			name: "one request per record, bare JSON paths", url: "/orders/*/lines/*",
			path: []string{"$.body.id", "v2"}, header: "$.body.id", query: map[string]string{"key": "$.body.key", "fixed": "yes"},
			want: []string{
				"/orders/a%2F1/lines/v2?fixed=yes&key=k+1 id=a/1 static=s3cret",
				"/orders/b2/lines/v2?fixed=yes&key=k2 id=b2 static=s3cret",
			},
		},
		{
			name: "one request per record, placeholders", url: "/orders/<$.body.id>",
			header: "<$.body.id>", query: map[string]string{"key": "<$.body.key>"},
			want: []string{
				"/orders/a%2F1?key=k+1 id=a/1 static=s3cret",
				"/orders/b2?key=k2 id=b2 static=s3cret",
			},
		},
		{
			name: "a batch takes its first record's", batch: true, url: "/orders/*",
			path: []string{"<$.body.id>"}, header: "$.body.id", query: map[string]string{"key": "$.body.key"},
			want: []string{"/orders/a%2F1?key=k+1 id=a/1 static=s3cret"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			srv := httptest.NewServer(rec)
			defer srv.Close()
			h, err := enrich.NewHTTP(enrich.HTTPConfig{
				URL: srv.URL + tt.url, Batch: tt.batch, PathParameters: tt.path, Query: tt.query,
				Headers: map[string]string{"X-Id": tt.header, "X-Static": "s3cret"},
				Vars:    template.Vars{PipeName: "p"},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close(context.Background())
			out, res, err := h.Enrich(context.Background(), []*pipe.Event{
				event("m1", `{"id":"a/1","key":"k 1"}`),
				event("m2", `{"id":"b2","key":"k2"}`),
			})
			if err != nil || len(res.Failures) > 0 {
				t.Fatalf("Enrich: %v %v", res, err)
			}
			if len(out) != 2 {
				t.Errorf("%d events out, want 2", len(out))
			}
			if got := rec.requests(); !slices.Equal(got, tt.want) {
				t.Errorf("requests\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// path_parameters need one `*` each in the URL (which may come from a
// variable, and so is checked when the enrichment is made); the error does
// not quote the URL.
func TestHTTPEnrichmentRefusesAURLWithTheWrongNumberOfWildcards(t *testing.T) {
	for _, tt := range []struct {
		url  string
		path []string
		want string
	}{
		{"https://user:pw@api.example.com/a/*/b/*", []string{"$.body.id"}, "url has 2 '*' for 1 path_parameters"},
		{"https://user:pw@api.example.com/a", []string{"x"}, "url has 0 '*' for 1 path_parameters"},
	} {
		_, err := enrich.NewHTTP(enrich.HTTPConfig{URL: tt.url, PathParameters: tt.path})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewHTTP(%d path parameters) = %v, want %q", len(tt.path), err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("the error quotes the URL: %v", err)
		}
	}
}

// A record whose header would hold a line break fails alone, as a client
// error; the others are enriched.
func TestHTTPEnrichmentFailsARecordWhoseHeaderCannotBeSent(t *testing.T) {
	rec := &recorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	h, err := enrich.NewHTTP(enrich.HTTPConfig{URL: srv.URL, Batch: false, Headers: map[string]string{"X-Id": "$.body.id"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(context.Background())
	out, res, err := h.Enrich(context.Background(), []*pipe.Event{event("bad", `{"id":"a\nb"}`), event("good", `{"id":"g"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) != 1 || res.Failures[0].ID != "bad" || !core.IsPermanent(res.Failures[0].Err) {
		t.Errorf("failures %v, want bad alone, permanent", res.Failures)
	}
	if len(out) != 1 || out[0].ID() != "good" {
		t.Errorf("out %v", outputs(out))
	}
}
