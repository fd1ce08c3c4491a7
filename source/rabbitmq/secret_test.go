package rabbitmq_test

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/pipesproject/pipes/internal/rabbittest"
	"github.com/pipesproject/pipes/source"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// Relies on: the management API creating a user with a password and
// permissions on the default vhost (PUT /api/users, /api/permissions), and
// closing a connection (DELETE /api/connections/{name}).
func TestThePasswordAppearsInNoErrorLogRecordOrARN(t *testing.T) {
	rabbittest.ManagementURL(t) // skips without it: the test makes its user through the management API
	user, pw := "pipes-test-"+rand.Text()[:8], "pw-"+rand.Text()
	if code := management(t, http.MethodPut, "/api/users/"+user, map[string]string{"password": pw, "tags": ""}, nil); code >= 300 {
		t.Fatalf("creating user %s: HTTP %d", user, code)
	}
	t.Cleanup(func() { management(t, http.MethodDelete, "/api/users/"+user, nil, nil) })
	perm := map[string]string{"configure": ".*", "write": ".*", "read": ".*"}
	if code := management(t, http.MethodPut, "/api/permissions/%2F/"+user, perm, nil); code >= 300 {
		t.Fatalf("granting %s: HTTP %d", user, code)
	}
	host := strings.TrimPrefix(strings.TrimSuffix(rabbittest.URL(t), "/"), "amqp://guest:guest@")
	good := "amqp://" + user + ":" + url.QueryEscape(pw) + "@" + host + "/"
	var seen []string // every error and log text

	// Errors of New, of Open (a missing queue, a wrong password), and of a
	// management URL with a password of its own.
	for _, cfg := range []rabbitmq.Config{
		{URL: "amqp://" + user + ":" + pw + "@" + host + ":notaport/", Queue: "q"},
		{URL: "amqp://" + user + ":" + pw + "@[::1/", Queue: "q"},
		{URL: good, Queue: "pipes-no-such-queue"},
		{URL: "amqp://" + user + ":" + pw + "x@" + host + "/", Queue: "q"},
	} {
		src, err := rabbitmq.New(cfg)
		if err == nil {
			_, err = src.Open(t.Context())
			_ = src.Close(context.Background())
		}
		if err == nil {
			t.Fatalf("config %d: no error", len(seen))
		}
		seen = append(seen, err.Error())
	}

	q := rabbittest.Name(t, "")
	rabbittest.DeclareQueue(t, q, rabbittest.QueueOptions{})
	// The user has no management tag: the API refuses it, and says so.
	src := open(t, rabbitmq.Config{URL: good, Queue: q, ManagementURL: "http://admin:" + pw + "@127.0.0.1:1"})
	src2 := open(t, rabbitmq.Config{URL: good, Queue: q})
	if !strings.Contains(src2.logs.String(), "refused the credentials") {
		t.Errorf("no warning that the management API refused the user:\n%s", src2.logs)
	}
	rabbittest.Publish(t, q, "secret-free")
	m := receive(t, src, 1, 10*time.Second)[0]
	rec, _ := m.JSON()
	seen = append(seen, string(rec), src.info.ARN, m.EventSourceARN)
	closeConnections(t, q)
	if err := src.Ack(t.Context(), []*source.Message{m}); err != nil {
		seen = append(seen, err.Error())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	for ctx.Err() == nil {
		if _, err := src.Receive(ctx, 10); err != nil {
			seen = append(seen, err.Error())
		}
	}
	cancel()
	seen = append(seen, src.logs.String(), src2.logs.String())
	for _, s := range seen {
		if strings.Contains(s, pw) || strings.Contains(s, url.QueryEscape(pw)) {
			t.Errorf("the password appears in %q", s)
		}
	}
	if !strings.Contains(src.logs.String(), "reconnect") {
		t.Errorf("no reconnection logged:\n%s", src.logs)
	}
}
