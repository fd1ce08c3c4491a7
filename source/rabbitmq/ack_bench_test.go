package rabbitmq

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/pipesproject/pipes/internal/rabbittest"
)

// BenchmarkConcurrentBatchAcks runs the rabbitjob pipe's settling pattern
// on the local broker: 16 workers each Receive a batch of 10 (prefetch
// 160), wait as a POST would (2 ms and an exponentially distributed
// jitter of 1 ms), and Ack it. It reports the basic.ack frames a message
// (ack-frames/msg), the CPU of the process a message (cpu-ns/op), and
// messages a second, with the linger (ackLinger) and without (linger=0).
func BenchmarkConcurrentBatchAcks(b *testing.B) {
	for _, linger := range []time.Duration{0, ackLinger} {
		b.Run("linger="+linger.String(), func(b *testing.B) {
			q := rabbittest.Name(b, "")
			rabbittest.DeclareQueue(b, q, rabbittest.QueueOptions{})
			n := max(b.N, 2000)
			ch := rabbittest.Channel(b)
			ctx := context.Background()
			for i := range n {
				if err := ch.PublishWithContext(ctx, "", q, false, false, amqp.Publishing{Body: []byte("m-" + strconv.Itoa(i))}); err != nil {
					b.Fatal(err)
				}
			}
			for deadline := time.Now().Add(time.Minute); rabbittest.Count(b, q) < n && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			src, err := New(Config{URL: rabbittest.URL(b), Queue: q, Prefetch: 160, WaitTime: time.Second, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := src.Open(ctx); err != nil {
				b.Fatal(err)
			}
			defer src.Close(ctx)
			ss, err := src.current(ctx)
			if err != nil {
				b.Fatal(err)
			}
			ss.acks.mu.Lock()
			ss.acks.linger = linger
			ss.acks.mu.Unlock()
			var done atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0 := processCPUTime(b)
			start := time.Now()
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(w), 1))
					for done.Load() < int64(n) {
						msgs, err := src.Receive(ctx, 10)
						if err != nil {
							b.Error(err)
							return
						}
						if len(msgs) == 0 {
							continue
						}
						time.Sleep(2*time.Millisecond + time.Duration(rng.ExpFloat64()*float64(time.Millisecond)))
						if err := src.Ack(ctx, msgs); err != nil {
							b.Error(err)
							return
						}
						done.Add(int64(len(msgs)))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			ss.acks.flush()
			b.StopTimer()
			ss.acks.mu.Lock()
			frames := ss.acks.frames
			ss.acks.mu.Unlock()
			b.ReportMetric(float64(frames)/float64(n), "ack-frames/msg")
			b.ReportMetric(float64(processCPUTime(b)-cpu0)/float64(n), "cpu-ns/msg")
			b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// processCPUTime is the process's CPU time, user and system (rusage).
func processCPUTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
