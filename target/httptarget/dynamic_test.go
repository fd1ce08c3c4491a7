package httptarget_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/pipesproject/pipes/internal/keyerr"
	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/target/httptarget"
	"github.com/pipesproject/pipes/template"
)

func recordEvent(id, body string) *pipe.Event {
	ev, _ := pipe.NewEvent(&source.Message{MessageID: id, Body: body, Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
	return ev
}

func TestDynamicURLQueryAndHeadersComeFromTheRecord(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.EscapedPath()+"?"+r.URL.RawQuery+" tenant="+r.Header.Get("X-Tenant")+" key="+r.Header.Get("X-Key"))
		mu.Unlock()
	}))
	defer srv.Close()
	tg, err := httptarget.New(httptarget.Config{
		URL:     srv.URL + "/customers/<$.body.customer>/orders",
		Batch:   false,
		Query:   map[string]string{"order": "<$.body.id>", "pipe": "<aws.pipes.pipe-name>"},
		Headers: map[string]string{"X-Tenant": "<$.body.tenant>", "X-Key": "static-secret"},
		Vars:    template.Vars{PipeName: "orders"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := tg.Deliver(context.Background(), []*pipe.Event{
		recordEvent("m1", `{"customer":"c 1/../admin","id":7,"tenant":"acme"}`),
	})
	if err != nil || len(res.Failures) != 0 {
		t.Fatalf("Deliver: %v %v", res, err)
	}
	want := "/customers/c%201%2F..%2Fadmin/orders?order=7&pipe=orders tenant=acme key=static-secret"
	if len(seen) != 1 || seen[0] != want {
		t.Fatalf("request %v, want %q (values escaped: a record cannot add path segments)", seen, want)
	}
}

func TestABatchTakesItsDynamicParametersFromItsFirstRecord(t *testing.T) {
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { paths = append(paths, r.URL.Path) }))
	defer srv.Close()
	tg, err := httptarget.New(httptarget.Config{URL: srv.URL + "/t/<$.body.t>", Batch: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Deliver(context.Background(), []*pipe.Event{recordEvent("a", `{"t":"one"}`), recordEvent("b", `{"t":"two"}`)}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(paths, ",") != "/t/one" {
		t.Fatalf("paths %v", paths)
	}
}

func TestDynamicParametersAreCheckedAtConstruction(t *testing.T) {
	for _, tc := range []struct{ name, url string }{
		{"a placeholder in the host is refused", "http://<$.body.host>/x"},
		{"an unclosed placeholder is refused", "http://h/<$.body.x"},
		{"a bad path is refused", "http://h/<$.body..x>"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := httptarget.New(httptarget.Config{URL: tc.url}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestDynamicParametersReadTheRecordNotTheRenderedPayload(t *testing.T) {
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { path = r.URL.Path }))
	defer srv.Close()
	tg, err := httptarget.New(httptarget.Config{URL: srv.URL + "/<$.body.id>"})
	if err != nil {
		t.Fatal(err)
	}
	ev := recordEvent("m", `{"id":"from-record"}`)
	ev.RecordJSON = []byte(`{"id":"from-payload"}`) // what an input template made
	if _, err := tg.Deliver(context.Background(), []*pipe.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if path != "/from-record" {
		t.Fatalf("path %q, want the record's value (Pipes evaluates dynamic parameters before the input template)", path)
	}
}

// Pipes' dynamic path parameters: "the whole value must be a JSON path",
// evaluated against the event before input transformation; allowed on
// header values and query string parameters of HttpParameters (SPEC §5.1,
// eb-pipes-event-target "Dynamic path parameters"). pipes takes both that
// bare form and `<$.path>` in the same keys.
func TestBareJSONPathHeaderAndQueryValuesAreDynamic(t *testing.T) {
	tests := []struct {
		name, header, query, want string
	}{
		{"bare paths", "$.body.tenant", "$.body.id", "q=7 tenant=acme"},
		{"placeholders", "<$.body.tenant>", "<$.body.id>", "q=7 tenant=acme"},
		{"a constant that merely holds a dollar", "US$.5", "a$.b", "q=a%24.b tenant=US$.5"},
		{"a constant with a dollar after its start", "Bearer $.x", "a $[b", "q=a+%24%5Bb tenant=Bearer $.x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.URL.RawQuery+" tenant="+r.Header.Get("X-Tenant"))
				mu.Unlock()
			}))
			defer srv.Close()
			tg, err := httptarget.New(httptarget.Config{
				URL: srv.URL, Batch: false,
				Query:   map[string]string{"q": tt.query},
				Headers: map[string]string{"X-Tenant": tt.header},
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := tg.Deliver(context.Background(), []*pipe.Event{recordEvent("m1", `{"id":7,"tenant":"acme"}`)})
			if err != nil || len(res.Failures) != 0 {
				t.Fatalf("Deliver: %v %v", res, err)
			}
			if len(seen) != 1 || seen[0] != tt.want {
				t.Errorf("request %q, want %q", seen, tt.want)
			}
		})
	}
}

// A value that starts like a JSON path ($. or $[) is one, in a header, a
// query parameter or a path parameter as in every templated key: when it
// does not parse, New refuses it, naming the key (keyerr) and, for a
// header or query value (maybe a secret meant as a constant), without
// quoting it.
func TestAnInvalidBareJSONPathIsRefusedAtItsKey(t *testing.T) {
	for _, tt := range []struct {
		name    string
		cfg     httptarget.Config
		key     string
		want    string
		notWant string
	}{
		{
			"a header ending with a dot",
			httptarget.Config{Headers: map[string]string{"X-Id": "$.body."}},
			"headers.X-Id", `header "X-Id": the value starts with $. or $[, so it is a JSON path, and it does not parse (column 8 of the value, which is not shown)`, "$.body.",
		},
		{
			"a query value with a space",
			httptarget.Config{Query: map[string]string{"q": "$.secret token"}},
			"query.q", `query parameter "q": the value starts with $. or $[, so it is a JSON path, and it does not parse (column 9 of the value, which is not shown)`, "secret",
		},
		{
			"a header with an unclosed index",
			httptarget.Config{Headers: map[string]string{"X-Id": "$[x"}},
			"headers.X-Id", `header "X-Id": the value starts with $. or $[`, "$[x",
		},
		{
			"a path parameter with two dots",
			httptarget.Config{URL: "https://x.example.com/a/*", PathParameters: []string{"$.body..x"}},
			"path_parameters[0]", `path parameter 1 "$.body..x": input template:`, "",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if cfg.URL == "" {
				cfg.URL = "https://x.example.com/a"
			}
			_, err := httptarget.New(cfg)
			if err == nil {
				t.Fatal("New took the value")
			}
			ps := keyerr.Split(err)
			if len(ps) != 1 || ps[0].Key != tt.key || !strings.HasPrefix(ps[0].Msg, tt.want) {
				t.Fatalf("problems %q, want one at %s starting %q", ps, tt.key, tt.want)
			}
			if tt.notWant != "" && strings.Contains(err.Error(), tt.notWant) {
				t.Errorf("the error quotes the value: %v", err)
			}
		})
	}
}

// path_parameters fill the URL's `*`, one each, in order (Pipes'
// PathParameterValues), so that the URL may come from a variable: a bare
// JSON path and a <$.path> placeholder alike are rendered per request,
// path-escaped; a URL with the wrong number of `*` is refused by New,
// without quoting it.
func TestPathParametersFillTheURLsWildcardsInOrder(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
	}))
	defer srv.Close()
	tg, err := httptarget.New(httptarget.Config{
		URL: srv.URL + "/tenants/*/orders/*/v*", Batch: false,
		PathParameters: []string{"$.body.tenant", "<$.body.id>", "2"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := tg.Deliver(context.Background(), []*pipe.Event{recordEvent("m1", `{"tenant":"a/b","id":7}`)}); err != nil || len(res.Failures) > 0 {
		t.Fatalf("Deliver: %v %v", res, err)
	}
	if want := "/tenants/a%2Fb/orders/7/v2"; len(paths) != 1 || paths[0] != want {
		t.Errorf("paths %v, want %s", paths, want)
	}
	for _, tt := range []struct {
		url    string
		params []string
		want   string
	}{
		{"https://u:secret@api.example.com/a/*", []string{"x", "y"}, "url has 1 '*' for 2 path_parameters"},
		{"https://u:secret@api.example.com/a", []string{"$.body.id"}, "url has 0 '*' for 1 path_parameters"},
	} {
		_, err := httptarget.New(httptarget.Config{URL: tt.url, PathParameters: tt.params})
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("New(%d path parameters) = %v, want %q without the URL", len(tt.params), err, tt.want)
		}
	}
}
