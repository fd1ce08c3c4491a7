// Command rabbitjob is the hand-written consumer that does pipes' job in
// the benchmark's RabbitMQ same-job comparison (issue 21), written the
// obvious way with amqp091-go and encoding/json: one connection, a QoS
// prefetch, a fixed number of workers each taking the first delivery and
// then what else is already buffered up to the batch size (pipes'
// batch_window 0), building the Pipes RabbitMQ record of each delivery
// with encoding/json, posting the batch as one JSON array to an HTTP
// target with a client whose idle pool holds a connection per worker, and
// acking after a 2xx answer (the items a partial batch answer names are
// requeued). It runs until SIGINT or SIGTERM; batches under way finish.
//
//	rabbitjob -url amqp://guest:guest@127.0.0.1:5672/ -queue Q -target URL -concurrency 16
//
// By default the workers share one channel whose prefetch is -prefetch
// (0: batch × concurrency, pipes' default) and ack each message
// (basic.ack, multiple false), as pipes does. With -channels each worker
// has a channel of its own with prefetch ÷ concurrency and acks its batch
// with one basic.ack multiple of its last delivery tag.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "rabbitjob:", err)
		os.Exit(1)
	}
}

// timestampLayout is how the record shows the AMQP timestamp (UTC).
const timestampLayout = "Jan 2, 2006, 3:04:05 PM"

// record is the Pipes RabbitMQ record of a delivery (the shape pipes
// sends): data is the body, base64-encoded by encoding/json.
type record struct {
	MessageID       string     `json:"messageId"`
	EventSource     string     `json:"eventSource"`
	EventSourceArn  string     `json:"eventSourceArn"`
	EventSourceKey  string     `json:"eventSourceKey"`
	BasicProperties properties `json:"basicProperties"`
	Redelivered     bool       `json:"redelivered"`
	Data            []byte     `json:"data"`
}

// properties are the record's basicProperties: every AMQP property, null
// when unset.
type properties struct {
	ContentType     *string        `json:"contentType"`
	ContentEncoding *string        `json:"contentEncoding"`
	Headers         map[string]any `json:"headers"`
	DeliveryMode    *uint8         `json:"deliveryMode"`
	Priority        *uint8         `json:"priority"`
	CorrelationID   *string        `json:"correlationId"`
	ReplyTo         *string        `json:"replyTo"`
	Expiration      *string        `json:"expiration"`
	MessageID       *string        `json:"messageId"`
	Timestamp       *string        `json:"timestamp"`
	Type            *string        `json:"type"`
	UserID          *string        `json:"userId"`
	AppID           *string        `json:"appId"`
	ClusterID       *string        `json:"clusterId"`
	BodySize        int            `json:"bodySize"`
}

// answer is the partial batch answer.
type answer struct {
	BatchItemFailures []struct {
		ItemIdentifier string `json:"itemIdentifier"`
	} `json:"batchItemFailures"`
}

// config is what the flags say.
type config struct {
	url         string
	queue       string
	target      string
	concurrency int
	batch       int
	prefetch    int  // 0: batch × concurrency
	channels    bool // a channel per worker, multiple acks
}

func run() error {
	var c config
	flag.StringVar(&c.url, "url", "amqp://guest:guest@127.0.0.1:5672/", "AMQP URL of the broker")
	flag.StringVar(&c.queue, "queue", "", "queue to consume")
	flag.StringVar(&c.target, "target", "", "HTTP target URL")
	flag.IntVar(&c.concurrency, "concurrency", 16, "workers (concurrent batches)")
	flag.IntVar(&c.batch, "batch", 10, "deliveries a batch holds at most")
	flag.IntVar(&c.prefetch, "prefetch", 0, "QoS prefetch in all (0: batch × concurrency)")
	flag.BoolVar(&c.channels, "channels", false, "a channel per worker (prefetch ÷ concurrency each) and one multiple ack per batch")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("creating the CPU profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("starting the CPU profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if c.queue == "" || c.target == "" {
		return errors.New("-queue and -target are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return consume(ctx, c, slog.New(slog.NewTextHandler(os.Stderr, nil)))
}

// consumer holds what every worker shares.
type consumer struct {
	cfg    config
	http   *http.Client
	arn    string
	key    string
	log    *slog.Logger
	closed chan *amqp.Error // the connection's end
}

// consume drains c.queue until ctx ends or the connection closes.
func consume(ctx context.Context, c config, log *slog.Logger) error {
	c.batch = max(c.batch, 1)
	c.concurrency = max(c.concurrency, 1)
	if c.prefetch <= 0 {
		c.prefetch = c.batch * c.concurrency
	}
	uri, err := amqp.ParseURI(c.url)
	if err != nil {
		return fmt.Errorf("reading the AMQP URL: %w", err)
	}
	conn, err := amqp.Dial(c.url)
	if err != nil {
		return fmt.Errorf("connecting to RabbitMQ: %w", err)
	}
	defer conn.Close()
	k := &consumer{
		cfg: c,
		http: &http.Client{
			Transport: &http.Transport{MaxIdleConns: c.concurrency, MaxIdleConnsPerHost: c.concurrency},
			Timeout:   30 * time.Second,
		},
		arn:    "rabbitmq://" + net.JoinHostPort(uri.Host, strconv.Itoa(uri.Port)) + "/" + url.PathEscape(uri.Vhost) + "/" + url.PathEscape(c.queue),
		key:    c.queue + "::" + uri.Vhost,
		log:    log,
		closed: conn.NotifyClose(make(chan *amqp.Error, 1)),
	}
	type lane struct {
		ch *amqp.Channel
		ds <-chan amqp.Delivery
	}
	open := func(prefetch int) (lane, error) {
		ch, err := conn.Channel()
		if err != nil {
			return lane{}, fmt.Errorf("opening a channel: %w", err)
		}
		if err := ch.Qos(prefetch, 0, false); err != nil {
			return lane{}, fmt.Errorf("setting the prefetch: %w", err)
		}
		ds, err := ch.Consume(c.queue, "", false, false, false, false, nil)
		if err != nil {
			return lane{}, fmt.Errorf("consuming %s: %w", c.queue, err)
		}
		return lane{ch, ds}, nil
	}
	lanes := make([]lane, c.concurrency)
	if c.channels {
		for i := range lanes {
			if lanes[i], err = open(max(1, c.prefetch/c.concurrency)); err != nil {
				return err
			}
		}
	} else {
		l, err := open(c.prefetch)
		if err != nil {
			return err
		}
		for i := range lanes {
			lanes[i] = l
		}
	}
	var wg sync.WaitGroup
	for _, l := range lanes {
		wg.Go(func() { k.work(ctx, l.ch, l.ds) })
	}
	wg.Wait()
	select {
	case e := <-k.closed:
		if e != nil {
			return fmt.Errorf("the connection closed: %w", e)
		}
	default:
	}
	return nil
}

// work takes batches from ds and posts and acks them until ctx ends or ds
// closes.
func (k *consumer) work(ctx context.Context, ch *amqp.Channel, ds <-chan amqp.Delivery) {
	batch := make([]amqp.Delivery, 0, k.cfg.batch)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case d, ok := <-ds:
			if !ok {
				return
			}
			batch = append(batch, d)
		}
	more:
		for len(batch) < k.cfg.batch {
			select {
			case d, ok := <-ds:
				if !ok {
					break more
				}
				batch = append(batch, d)
			default:
				break more
			}
		}
		k.handle(ctx, ch, batch)
	}
}

// handle posts one batch and settles it: acked after a 2xx (the items the
// answer names requeued), requeued after an error.
func (k *consumer) handle(ctx context.Context, ch *amqp.Channel, batch []amqp.Delivery) {
	records := make([]record, len(batch))
	for i := range batch {
		records[i] = k.record(&batch[i])
	}
	failed, err := k.post(ctx, records)
	if err != nil {
		k.log.Error("posting", "error", err)
		var nerr error
		if k.cfg.channels {
			nerr = ch.Nack(batch[len(batch)-1].DeliveryTag, true, true)
		} else {
			for _, d := range batch {
				nerr = errors.Join(nerr, d.Nack(false, true))
			}
		}
		if nerr != nil {
			k.log.Error("requeueing", "error", nerr)
		}
		return
	}
	if k.cfg.channels && len(failed) == 0 {
		if err := ch.Ack(batch[len(batch)-1].DeliveryTag, true); err != nil {
			k.log.Error("acking", "error", err)
		}
		return
	}
	for i := range batch {
		var err error
		if failed[records[i].MessageID] {
			err = batch[i].Nack(false, true)
		} else {
			err = batch[i].Ack(false)
		}
		if err != nil {
			k.log.Error("settling", "error", err)
		}
	}
}

// record builds d's Pipes RabbitMQ record.
func (k *consumer) record(d *amqp.Delivery) record {
	p := properties{
		ContentType: str(d.ContentType), ContentEncoding: str(d.ContentEncoding),
		DeliveryMode: octet(d.DeliveryMode), Priority: octet(d.Priority),
		CorrelationID: str(d.CorrelationId), ReplyTo: str(d.ReplyTo), Expiration: str(d.Expiration),
		MessageID: str(d.MessageId), Type: str(d.Type), UserID: str(d.UserId), AppID: str(d.AppId),
		BodySize: len(d.Body),
	}
	if !d.Timestamp.IsZero() {
		p.Timestamp = str(d.Timestamp.UTC().Format(timestampLayout))
	}
	if len(d.Headers) > 0 {
		p.Headers = make(map[string]any, len(d.Headers))
		for name, v := range d.Headers {
			p.Headers[name] = header(v)
		}
	}
	return record{
		MessageID: d.MessageId, EventSource: "aws:rmq", EventSourceArn: k.arn, EventSourceKey: k.key,
		BasicProperties: p, Redelivered: d.Redelivered, Data: d.Body,
	}
}

// header maps a header value as the record shows it: strings and byte
// arrays as {"bytes":[…]}, tables recursively, the rest as they are.
func header(v any) any {
	switch v := v.(type) {
	case string:
		return byteArray([]byte(v))
	case []byte:
		return byteArray(v)
	case time.Time:
		return v.UTC().Format(timestampLayout)
	case amqp.Table:
		out := make(map[string]any, len(v))
		for name, e := range v {
			out[name] = header(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = header(e)
		}
		return out
	}
	return v
}

func byteArray(b []byte) map[string][]int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return map[string][]int{"bytes": out}
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func octet(n uint8) *uint8 {
	if n == 0 {
		return nil
	}
	return &n
}

// post sends one batch to the target, checks for a 2xx answer and returns
// the ids the answer names as failed.
func (k *consumer) post(ctx context.Context, records []record) (map[string]bool, error) {
	body, err := json.Marshal(records)
	if err != nil {
		return nil, fmt.Errorf("encoding the records: %w", err)
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(ctx), http.MethodPost, k.cfg.target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building the target request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := k.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("posting a batch to the target: %w", err)
	}
	data, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the target's answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("posting a batch to the target: status %d", resp.StatusCode)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var a answer
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("decoding the target's answer %q: %w", strings.TrimSpace(string(data)), err)
	}
	failed := make(map[string]bool, len(a.BatchItemFailures))
	for _, f := range a.BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}
