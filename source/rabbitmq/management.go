package rabbitmq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// queueFacts is what the broker knows of a queue and AMQP does not tell:
// its type, dead-letter exchange and delivery limit, arguments over
// policies.
type queueFacts struct {
	// Type is "classic", "quorum" or "stream"; "" when unknown.
	Type string
	// DeadLetterExchange is the effective dead-letter exchange; HasDLX
	// tells it apart from none ("" is the default exchange).
	DeadLetterExchange string
	HasDLX             bool
	// DeadLetterRoutingKey is the effective dead-letter routing key.
	DeadLetterRoutingKey string
	// DeliveryLimit is the effective delivery limit (quorum queues), 0 none.
	DeliveryLimit int
	// ConsumerTimeout is the queue's x-consumer-timeout argument or
	// consumer-timeout policy key, 0 when neither is set (then the
	// broker's global consumer_timeout, which the API does not show,
	// applies: DefaultConsumerTimeout is assumed).
	ConsumerTimeout time.Duration
}

// errNotFound is the management API's 404 for the queue.
var errNotFound = errors.New("the management API does not know the queue")

// managementTimeout bounds one management API call.
const managementTimeout = 5 * time.Second

// fetchFacts reads GET /api/queues/{vhost}/{queue}.
func (s *Source) fetchFacts(ctx context.Context) (queueFacts, error) {
	ctx, cancel := context.WithTimeout(ctx, managementTimeout)
	defer cancel()
	u := s.mgmt + "/api/queues/" + url.PathEscape(s.uri.Vhost) + "/" + url.PathEscape(s.cfg.Queue)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return queueFacts{}, fmt.Errorf("building the management API request: %w", err)
	}
	req.SetBasicAuth(s.mgmtUser, s.mgmtPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return queueFacts{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return queueFacts{}, fmt.Errorf("reading the management API's answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return queueFacts{}, errNotFound
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return queueFacts{}, fmt.Errorf("the management API refused the credentials (HTTP %d; the user needs the management or monitoring tag)", resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return queueFacts{}, fmt.Errorf("the management API answered HTTP %d", resp.StatusCode)
	}
	return parseFacts(body)
}

// parseFacts reads the management API's description of a queue: its type,
// arguments and effective policy definition (an object, or null or [] when
// no policy applies). Arguments override the policy.
func parseFacts(body []byte) (queueFacts, error) {
	var q struct {
		Type      string          `json:"type"`
		Arguments json.RawMessage `json:"arguments"`
		Policy    json.RawMessage `json:"effective_policy_definition"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&q); err != nil {
		return queueFacts{}, fmt.Errorf("the management API's answer is not a queue: %w", err)
	}
	args, err := object(q.Arguments)
	if err != nil {
		return queueFacts{}, fmt.Errorf("the queue's arguments: %w", err)
	}
	policy, err := object(q.Policy)
	if err != nil {
		return queueFacts{}, fmt.Errorf("the queue's effective policy: %w", err)
	}
	f := queueFacts{Type: q.Type}
	if f.Type == "" {
		if t, ok := args["x-queue-type"].(string); ok {
			f.Type = t
		}
	}
	if v, ok := lookup(args, "x-dead-letter-exchange", policy, "dead-letter-exchange"); ok {
		name, ok := v.(string)
		if !ok {
			return queueFacts{}, fmt.Errorf("the dead-letter exchange %v is not a name", v)
		}
		f.DeadLetterExchange, f.HasDLX = name, true
	}
	if v, ok := lookup(args, "x-dead-letter-routing-key", policy, "dead-letter-routing-key"); ok {
		if k, ok := v.(string); ok {
			f.DeadLetterRoutingKey = k
		}
	}
	if v, ok := lookup(args, "x-delivery-limit", policy, "delivery-limit"); ok {
		n, err := integer(v)
		if err != nil {
			return queueFacts{}, fmt.Errorf("the delivery limit: %w", err)
		}
		f.DeliveryLimit = max(n, 0) // -1 (or less) disables it
	}
	if v, ok := lookup(args, "x-consumer-timeout", policy, "consumer-timeout"); ok {
		if n, err := integer(v); err == nil && n > 0 {
			f.ConsumerTimeout = time.Duration(n) * time.Millisecond
		}
	}
	return f, nil
}

// object decodes a JSON object; null and [] (how the API shows an empty
// policy) are empty.
func object(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) || bytes.Equal(raw, []byte("[]")) {
		return nil, nil
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// lookup returns the argument when the queue has it, else the policy key.
func lookup(args map[string]any, arg string, policy map[string]any, key string) (any, bool) {
	if v, ok := args[arg]; ok {
		return v, true
	}
	v, ok := policy[key]
	return v, ok
}

// integer reads a JSON number or a numeric string as an int.
func integer(v any) (int, error) {
	var s string
	switch v := v.(type) {
	case json.Number:
		s = v.String()
	case string:
		s = v
	default:
		return 0, fmt.Errorf("%v is not a number", v)
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return int(max(min(n, math.MaxInt32), math.MinInt32)), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	return int(max(min(f, math.MaxInt32), math.MinInt32)), nil
}
