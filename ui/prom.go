package ui

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// PromQuery is a PromQL query of a pipe's metrics the page offers for
// history longer than its 15 minutes.
type PromQuery struct {
	// Expr is the query.
	Expr string `json:"expr"`
	// What says what it shows.
	What string `json:"what"`
	// Link opens it in Prometheus's expression browser (Config's
	// PrometheusURL), the last hour graphed; "" when none is configured.
	Link string `json:"link,omitempty"`
}

// promQueries are pipe name's queries, linked to the expression browser
// at base when it is set.
func promQueries(base *url.URL, name string) []PromQuery {
	sel := fmt.Sprintf(`{pipe=%q}`, name)
	qs := []PromQuery{
		{Expr: "rate(pipes_messages_received_total" + sel + "[5m])", What: "received a second"},
		{Expr: "rate(pipes_messages_delivered_total" + sel + "[5m])", What: "delivered a second"},
		{Expr: "rate(pipes_messages_filtered_total" + sel + "[5m])", What: "filtered out a second"},
		{Expr: "sum by (stage) (rate(pipes_messages_failed_total" + sel + "[5m]))", What: "failed a second, by stage"},
		{Expr: "rate(pipes_messages_dead_lettered_total" + sel + "[5m])", What: "dead-lettered a second"},
		{Expr: "pipes_concurrency" + sel, What: "concurrency"},
		{Expr: "pipes_inflight_messages" + sel, What: "messages in flight"},
		{Expr: "pipes_circuit_open" + sel, What: "circuit open (1) or closed (0)"},
		{Expr: "histogram_quantile(0.99, rate(pipes_target_duration_seconds_bucket" + sel + "[5m]))", What: "batch latency at the target, p99"},
		{Expr: "histogram_quantile(0.5, rate(pipes_message_age_seconds_bucket" + sel + "[5m]))", What: "message age at receive, p50"},
	}
	if base == nil {
		return qs
	}
	for i := range qs {
		v := url.Values{"g0.expr": {qs[i].Expr}, "g0.tab": {"0"}, "g0.range_input": {"1h"}}
		u := *base
		u.Path = strings.TrimSuffix(u.Path, "/") + "/graph"
		u.RawQuery = v.Encode()
		qs[i].Link = u.String()
	}
	return qs
}

// parsePrometheusURL checks Config.PrometheusURL: an http(s) URL without
// credentials (the page would show them), nil for "".
func parsePrometheusURL(s string) (*url.URL, error) {
	if s == "" {
		return nil, nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, errors.New("the Prometheus URL does not parse as a URL")
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("the Prometheus URL must be an http or https URL with a host, like http://prometheus:9090 (got scheme %q)", u.Scheme)
	case u.User != nil:
		return nil, errors.New("the Prometheus URL must not hold credentials: the page links to it")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("the Prometheus URL must have no query or fragment: the page adds its own")
	}
	return u, nil
}
