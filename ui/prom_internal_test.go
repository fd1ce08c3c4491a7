package ui

import (
	"net/url"
	"strings"
	"testing"
)

func TestThePrometheusURLIsCheckedAndEachQueryLinked(t *testing.T) {
	for _, tt := range []struct {
		in, wantErr string
	}{
		{"", ""},
		{"http://prometheus:9090", ""},
		{"https://metrics.example.com/prom/", ""},
		{"prometheus:9090", "must be an http or https URL"},
		{"http://admin:hunter2@prometheus:9090", "must not hold credentials"},
		{"http://prometheus:9090/?x=1", "no query or fragment"},
	} {
		_, err := parsePrometheusURL(tt.in)
		if (tt.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("parsePrometheusURL(%q) = %v, want %q", tt.in, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	if qs := promQueries(nil, "orders"); len(qs) == 0 || qs[0].Link != "" {
		t.Fatalf("without a Prometheus URL: %+v", qs)
	}
	base, _ := parsePrometheusURL("https://metrics.example.com/prom/")
	for _, q := range promQueries(base, `my "pipe"`) {
		u, err := url.Parse(q.Link)
		if err != nil || u.Host != "metrics.example.com" || u.Path != "/prom/graph" {
			t.Fatalf("link %q of %s", q.Link, q.Expr)
		}
		if got := u.Query(); got.Get("g0.expr") != q.Expr || got.Get("g0.tab") != "0" || got.Get("g0.range_input") != "1h" {
			t.Errorf("link %q does not open %s graphed", q.Link, q.Expr)
		}
		if !strings.Contains(q.Expr, `{pipe="my \"pipe\""}`) {
			t.Errorf("query %s does not select the pipe", q.Expr)
		}
	}
}
