package pipe

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/pipesproject/pipes/source"
)

// The Keeper's tests use the settler's fakeSource: a keeper calls only the
// Nak and Extend of its source.

func TestKeeperCloseReleasesEveryHeldMessageAtOnce(t *testing.T) {
	src := &fakeSource{}
	k := NewKeeper(src, time.Minute, nil)
	now := time.Now()
	var want []string
	for i := range 25 {
		k.Hold(message(i), now)
		want = append(want, "h"+strconv.Itoa(i))
	}
	again := message(7)
	again.ReceiptHandle = "h7-again" // received anew after its hold lapsed
	k.Hold(again, now)
	want[7] = "h7-again"
	if n := k.Held(); n != 25 {
		t.Fatalf("%d held, want 25", n)
	}
	if err := k.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range src.callsOf("nak") {
		if len(c.handles) > maxReceive || c.d != 0 {
			t.Errorf("a release of %d messages to visibility %v, want at most %d at 0", len(c.handles), c.d, maxReceive)
		}
		got = append(got, c.handles...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("released %v, want %v (each message once, by its latest receipt)", got, want)
	}
	if n := k.Held(); n != 0 {
		t.Errorf("%d still held after Close", n)
	}
}

// A release must never be overtaken by an extension under way: SQS would
// apply the extension last and the message would stay hidden for a whole
// visibility after Close returned.
func TestKeeperCloseReleasesAfterAnExtensionUnderWay(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	src := &fakeSource{extend: func(context.Context, []*source.Message) error {
		entered <- struct{}{}
		<-release
		return nil
	}}
	k := NewKeeper(src, time.Minute, nil)
	k.Hold(message(1), time.Now().Add(-45*time.Second)) // due: 15 s of its lease left
	k.s.heartbeat(time.Now())
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- k.Close(context.Background()) }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while an extension was under way", err)
	default:
	}
	if n := len(src.callsOf("nak")); n != 0 {
		t.Fatalf("released while the extension was under way (%d nak calls)", n)
	}
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	exts, naks := src.callsOf("extend"), src.callsOf("nak")
	if len(exts) != 1 || len(naks) != 1 {
		t.Fatalf("%d extensions and %d releases, want 1 of each", len(exts), len(naks))
	}
	if !naks[0].at.After(exts[0].at) || naks[0].d != 0 {
		t.Fatalf("extend at %v, release (%v) at %v: want the release to visibility 0 after the extension", exts[0].at, naks[0].d, naks[0].at)
	}
}
