package rabbittest

import "testing"

func TestDeclarePublishGet(t *testing.T) {
	q := Name(t, "")
	DeclareQueue(t, q, QueueOptions{})
	Publish(t, q, `{"n":1}`, `{"n":2}`)
	if got := Get(t, q); len(got) != 2 || String(got[0]) != `{"n":1}` {
		t.Fatalf("got %d messages", len(got))
	}
}
