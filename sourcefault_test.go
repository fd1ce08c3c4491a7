package pipes_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/internal/sqstest"
	"github.com/pipesproject/pipes/pipe"
)

// proxy is a TCP proxy in front of the SQS-compatible server that can be
// taken down (connections refused and cut) and brought back, to play an
// endpoint that is down at start and mid-run.
type proxy struct {
	ln       net.Listener
	backend  string
	up       atomic.Bool
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newProxy(t *testing.T, backend string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, backend: backend}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.setUp(false)
		p.wg.Wait()
	})
	return p
}

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.accepted.Add(1)
		if !p.up.Load() {
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { defer p.wg.Done(); io.Copy(b, c); b.Close() }()
		go func() { defer p.wg.Done(); io.Copy(c, b); c.Close() }()
	}
}

// setUp brings the proxy up or takes it down, cutting open connections.
func (p *proxy) setUp(up bool) {
	p.up.Store(up)
	if !up {
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
		p.mu.Unlock()
	}
}

// Both servers: it relies only on send, receive and delete through a proxy.
func TestSQSEndpointDownAtStartAndMidRunIsRetriedWithBackoffAndRecovers(t *testing.T) {
	t.Parallel()
	sqstest.Servers(t, func(t *testing.T, s sqstest.Server) {
		testSQSEndpointDownAtStartAndMidRunIsRetriedWithBackoffAndRecovers(t, s)
	})
}

func testSQSEndpointDownAtStartAndMidRunIsRetriedWithBackoffAndRecovers(t *testing.T, s sqstest.Server) {
	fakeAWSEnv(t)
	endpoint := sqstest.EndpointOf(t, s)
	client := sqstest.ClientOf(t, s)
	queueURL, _ := sqstest.CreateQueue(t, client, sqstest.QueueOptions{VisibilityTimeout: 2 * time.Second, MaxReceiveCount: 10})
	u, _ := url.Parse(endpoint)
	px := newProxy(t, u.Host)
	proxied := "http://" + px.ln.Addr().String()
	target := newBatchServer(t)
	file := writeFile(t, "pipe.yaml", fmt.Sprintf(`
name: flaky
source: {type: sqs, queue_url: %s, endpoint: %s, region: us-east-1, wait_time: 1s}
target: {type: http, url: %s}
`, queueURL, proxied, target.URL))
	specs, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	metrics := pipe.NewMetrics(nil)
	built, err := pipes.NewRegistry().Build(context.Background(), specs, pipes.Env{Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	p := built[0]
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- pipe.NewRunner(built...).Run(ctx) }()
	defer func() { cancel(); <-done }()

	// Down at start: not ready, retrying with backoff, not busy-looping.
	time.Sleep(3 * time.Second)
	if p.Ready() {
		t.Fatal("ready while the endpoint is down")
	}
	if p.LastError() == nil {
		t.Error("no reason given while not ready")
	}
	if n := px.accepted.Load(); n > 60 {
		t.Errorf("%d connection attempts in 3 s while down: a busy loop", n)
	}

	// Up: it opens by itself and delivers.
	var first []string
	for i := range 30 {
		first = append(first, fmt.Sprintf(`{"wave":1,"n":%d}`, i))
	}
	sqstest.SendBodies(t, client, queueURL, first...)
	px.setUp(true)
	waitFor(t, 30*time.Second, "the first wave delivered", func() bool {
		_, ok := target.counts()
		return len(ok) == 30
	})
	if !p.Ready() {
		t.Error("not ready once the endpoint is back")
	}

	// Down mid-run: backoff, then recovery.
	px.setUp(false)
	before := px.accepted.Load()
	time.Sleep(4 * time.Second)
	// Up to 9 pollers were receiving when it went down, and each failed
	// receive is 4 connection attempts on the direct path (its own, then
	// the SDK client's 3 from scratch); the pipe's backoff then spaces
	// the receives out. A busy loop makes thousands.
	if n := px.accepted.Load() - before; n > 200 {
		t.Errorf("%d connection attempts in 4 s while down mid-run: a busy loop", n)
	}
	// Three receives in a row must fail first, each after the SDK's own
	// retries (up to a few seconds on a loaded machine).
	waitFor(t, 20*time.Second, "not ready while receives keep failing", func() bool { return !p.Ready() })
	var second []string
	for i := range 30 {
		second = append(second, fmt.Sprintf(`{"wave":2,"n":%d}`, i))
	}
	sqstest.SendBodies(t, client, queueURL, second...)
	px.setUp(true)
	waitFor(t, 40*time.Second, "the second wave delivered after the endpoint came back", func() bool {
		_, ok := target.counts()
		return len(ok) == 60
	})
	t.Logf("receive attempts: %v", testutil.ToFloat64(metrics.APICalls.WithLabelValues("flaky", "ReceiveMessage")))
}
