package sqs

import (
	"bufio"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cannedSQS is a minimal SQS server for benchmarks of the client's call
// path: it answers each request by its X-Amz-Target with a fixed answer
// (ReceiveMessage: testdata/receive10.json, ten 150 B messages as
// local-aws-sqs answers them; DeleteMessageBatch: ten successes), reading
// and writing with as little work of its own as it can, so that a CPU
// figure of the benchmark is mostly the client's.
type cannedSQS struct {
	ln      net.Listener
	answers map[string][]byte // by target, the whole HTTP answer
	invalid []byte            // the answer to any other target
	wg      sync.WaitGroup
}

func startCannedSQS(tb testing.TB) *cannedSQS {
	tb.Helper()
	receive, err := os.ReadFile("testdata/receive10.json")
	if err != nil {
		tb.Fatal(err)
	}
	var del strings.Builder
	del.WriteString(`{"Successful":[`)
	for i := range 10 {
		if i > 0 {
			del.WriteByte(',')
		}
		del.WriteString(`{"Id":"` + strconv.Itoa(i) + `"}`)
	}
	del.WriteString(`]}`)
	answer := func(body string) []byte {
		return []byte("HTTP/1.1 200 OK\r\nx-amzn-requestid: 5e04fc0b-e6bc-4cae-81c5-53aba6e612ce\r\n" +
			"Content-Type: application/x-amz-json-1.0\r\nDate: Wed, 02 Dec 2026 00:30:25 GMT\r\n" +
			"Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s := &cannedSQS{ln: ln, answers: map[string][]byte{
		"AmazonSQS.ReceiveMessage":     answer(string(receive)),
		"AmazonSQS.DeleteMessageBatch": answer(del.String()),
		"AmazonSQS.GetQueueAttributes": answer(`{"Attributes":{"QueueArn":"arn:aws:sqs:us-east-1:123456789012:cap","VisibilityTimeout":"30"}}`),
	}}
	body := `{"__type":"com.amazonaws.sqs#InvalidAction","message":"not canned"}`
	s.invalid = []byte("HTTP/1.1 400 Bad Request\r\nContent-Type: application/x-amz-json-1.0\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
	s.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Go(func() { s.serve(c) })
		}
	})
	tb.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func (s *cannedSQS) url() string { return "http://" + s.ln.Addr().String() }

// serve answers the requests of one connection until it closes.
func (s *cannedSQS) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 16<<10)
	for {
		length, target := -1, ""
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			if k, v, ok := strings.Cut(string(line), ":"); ok {
				switch strings.ToLower(k) {
				case "content-length":
					length, _ = strconv.Atoi(strings.TrimSpace(v))
				case "x-amz-target":
					target = strings.TrimSpace(v)
				}
			}
		}
		if length > 0 {
			if _, err := r.Discard(length); err != nil {
				return
			}
		}
		a, ok := s.answers[target]
		if !ok {
			a = s.invalid
		}
		if _, err := c.Write(a); err != nil {
			return
		}
	}
}

// BenchmarkReceiveAndDelete is one batch's SQS calls as the source makes
// them (Receive of ten messages with every attribute, then Delete of the
// ten), through the client New builds (the default AWS configuration from
// the environment, internal/h1), against cannedSQS in this process.
func BenchmarkReceiveAndDelete(b *testing.B) {
	srv := startCannedSQS(b)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDPIPESBENCH", "AWS_SECRET_ACCESS_KEY": "pipes-bench-secret",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull} {
		b.Setenv(k, v)
	}
	ctx := context.Background()
	src, err := New(ctx, Config{QueueURL: srv.url() + "/123456789012/cap", Endpoint: srv.url(), WaitTime: DefaultWaitTime, OnCall: func(string) {}})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close(ctx)
	if _, err := src.Open(ctx); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	c0 := processCPU()
	for b.Loop() {
		msgs, err := src.Receive(ctx, 10)
		if err != nil || len(msgs) != 10 {
			b.Fatalf("Receive: %d messages, %v", len(msgs), err)
		}
		if err := src.Delete(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is this process's user+system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
