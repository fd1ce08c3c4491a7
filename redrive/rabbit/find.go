package rabbit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// ErrNoDLQ is wrapped by FindDLQ's errors when it cannot name a single
// dead-letter queue (none, several, or the management API off or
// unusable): the caller should ask for the queue's name.
var ErrNoDLQ = errors.New("cannot tell the dead-letter queue")

// Found is the dead-letter queue FindDLQ found, and how.
type Found struct {
	// Queue is the dead-letter queue's name.
	Queue string
	// Exchange is the source queue's dead-letter exchange ("" the default
	// exchange).
	Exchange string
}

// Fallback is what a pipe's fallback keys (dead_letter_exchange,
// dead_letter_routing_key) say of its source queue's dead-lettering, for
// when the management API is off or cannot be reached.
type Fallback struct {
	// Exchange is the dead-letter exchange ("" the default exchange) and
	// RoutingKey its routing key; Set is false when the keys name none.
	Exchange, RoutingKey string
	Set                  bool
}

// FindDLQ finds the dead-letter queue of queue: its effective dead-letter
// exchange (argument over policy) from the management API, and the one
// queue bound to that exchange (GET
// /api/exchanges/{vhost}/{exchange}/bindings/source). A queue that
// dead-letters to the default exchange with a dead-letter routing key has
// that routing key's queue. When the management API is off or cannot be
// reached, fallback decides: the default exchange with a routing key
// names the queue without the API; a named exchange is told in the error,
// since its bindings cannot be read without it. Errors wrapping ErrNoDLQ
// say what was found and ask for the queue by name; others are failures
// of the calls. It blocks.
func (b *Broker) FindDLQ(ctx context.Context, queue string, fallback Fallback) (Found, error) {
	byKey := fallback.Set && fallback.Exchange == "" && fallback.RoutingKey != ""
	if b.mgmt == "" {
		switch {
		case byKey:
			return Found{Queue: fallback.RoutingKey}, nil
		case fallback.Set && fallback.Exchange != "":
			return Found{}, fmt.Errorf("%w: the dead-letter exchange of queue %s is %s (dead_letter_exchange), but the management API is off and it is needed to list the queues bound to the exchange",
				ErrNoDLQ, queue, fallback.Exchange)
		case fallback.Set:
			return Found{}, fmt.Errorf("%w: queue %s dead-letters to the default exchange (dead_letter_exchange) with each message's own routing key: set dead_letter_routing_key", ErrNoDLQ, queue)
		}
		return Found{}, fmt.Errorf("%w: the management API is off, so the dead-letter exchange of queue %s cannot be read (dead_letter_exchange and dead_letter_routing_key can name it)", ErrNoDLQ, queue)
	}
	info, err := b.queueInfo(ctx, queue)
	if errors.Is(err, errNotFound) {
		return Found{}, fmt.Errorf("RabbitMQ queue %s does not exist in vhost %s", queue, b.uri.Vhost)
	}
	if err != nil && byKey {
		return Found{Queue: fallback.RoutingKey}, nil // the default exchange routes to the key's queue
	}
	if err != nil {
		hint := ""
		if fallback.Set && fallback.Exchange != "" {
			hint = fmt.Sprintf(" (the pipe's dead_letter_exchange is %s, but listing the queues bound to it needs the API too)", fallback.Exchange)
		}
		return Found{}, fmt.Errorf("%w: reading queue %s from the management API at %s%s: %w", ErrNoDLQ, queue, b.mgmt, hint, err)
	}
	dlx, ok := info.deadLetter("x-dead-letter-exchange", "dead-letter-exchange")
	if !ok {
		return Found{}, fmt.Errorf("%w: queue %s has no dead-letter exchange (no x-dead-letter-exchange argument, no dead-letter-exchange policy)", ErrNoDLQ, queue)
	}
	if dlx == "" {
		if rk, ok := info.deadLetter("x-dead-letter-routing-key", "dead-letter-routing-key"); ok && rk != "" {
			return Found{Queue: rk, Exchange: ""}, nil
		}
		return Found{}, fmt.Errorf("%w: queue %s dead-letters to the default exchange with each message's own routing key", ErrNoDLQ, queue)
	}
	var bindings []struct {
		Destination     string `json:"destination"`
		DestinationType string `json:"destination_type"`
	}
	path := "/api/exchanges/" + url.PathEscape(b.uri.Vhost) + "/" + url.PathEscape(dlx) + "/bindings/source"
	if err := b.getJSON(ctx, path, &bindings); errors.Is(err, errNotFound) {
		return Found{}, fmt.Errorf("the dead-letter exchange %s of queue %s does not exist in vhost %s: the broker drops what it dead-letters", dlx, queue, b.uri.Vhost)
	} else if err != nil {
		return Found{}, fmt.Errorf("%w: listing the bindings of the dead-letter exchange %s of queue %s: %w", ErrNoDLQ, dlx, queue, err)
	}
	var queues, exchanges []string
	for _, bd := range bindings {
		switch {
		case bd.DestinationType == "queue" && !slices.Contains(queues, bd.Destination):
			queues = append(queues, bd.Destination)
		case bd.DestinationType == "exchange" && !slices.Contains(exchanges, bd.Destination):
			exchanges = append(exchanges, bd.Destination)
		}
	}
	switch len(queues) {
	case 1:
		return Found{Queue: queues[0], Exchange: dlx}, nil
	case 0:
		more := ""
		if len(exchanges) > 0 {
			more = " (it is bound to the exchanges " + strings.Join(exchanges, ", ") + ")"
		}
		return Found{}, fmt.Errorf("%w: no queue is bound to the dead-letter exchange %s of queue %s%s", ErrNoDLQ, dlx, queue, more)
	default:
		slices.Sort(queues)
		return Found{}, fmt.Errorf("%w: %d queues are bound to the dead-letter exchange %s of queue %s: %s",
			ErrNoDLQ, len(queues), dlx, queue, strings.Join(queues, ", "))
	}
}

// queueJSON is what the management API tells of a queue.
type queueJSON struct {
	Arguments map[string]any  `json:"arguments"`
	Policy    json.RawMessage `json:"effective_policy_definition"`
	Unacked   *int            `json:"messages_unacknowledged"`
}

// deadLetter returns the string argument arg, else the policy key.
func (q *queueJSON) deadLetter(arg, key string) (string, bool) {
	if v, ok := q.Arguments[arg]; ok {
		s, ok := v.(string)
		return s, ok
	}
	raw := bytes.TrimSpace(q.Policy)
	if len(raw) == 0 || raw[0] != '{' {
		return "", false // null, or [] when no policy applies
	}
	var policy map[string]any
	if json.Unmarshal(raw, &policy) != nil {
		return "", false
	}
	s, ok := policy[key].(string)
	return s, ok
}

// errNotFound is the management API's 404.
var errNotFound = errors.New("not found")

// queueInfo reads GET /api/queues/{vhost}/{queue}.
func (b *Broker) queueInfo(ctx context.Context, queue string) (*queueJSON, error) {
	var q queueJSON
	if err := b.getJSON(ctx, "/api/queues/"+url.PathEscape(b.uri.Vhost)+"/"+url.PathEscape(queue), &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// getJSON GETs a management API path and decodes its JSON answer.
func (b *Broker) getJSON(ctx context.Context, path string, v any) error {
	ctx, cancel := context.WithTimeout(ctx, managementTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.mgmt+path, nil)
	if err != nil {
		return fmt.Errorf("building the management API request: %w", err)
	}
	req.SetBasicAuth(b.mgmtUser, b.mgmtPass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return b.scrub(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("reading the management API's answer: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return errNotFound
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("the management API refused the credentials (HTTP %d; the user needs the management or monitoring tag)", resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("the management API answered HTTP %d", resp.StatusCode)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("the management API's answer to %s is not what was expected: %w", path, err)
	}
	return nil
}
