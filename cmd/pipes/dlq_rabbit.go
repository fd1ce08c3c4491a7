package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/pipesproject/pipes/config"
	"github.com/pipesproject/pipes/filter"
	"github.com/pipesproject/pipes/redrive"
	"github.com/pipesproject/pipes/redrive/rabbit"
	"github.com/pipesproject/pipes/source/rabbitmq"
)

// openRabbitDLQ connects to the broker of the pipe's rabbitmq source and
// finds its dead-letter queue (--queue, else the one queue bound to the
// source queue's dead-letter exchange). The caller closes the broker.
func openRabbitDLQ(ctx context.Context, spec config.Pipe, f dlqFlags) (*rabbit.Broker, string, error) {
	src := spec.Source
	b, err := rabbit.Dial(ctx, rabbit.Config{URL: src.URL, ManagementURL: src.ManagementURL})
	if err != nil {
		return nil, "", runtimeErr(fmt.Errorf("pipe %s: %w", spec.Name, err))
	}
	if f.queue != "" {
		return b, f.queue, nil
	}
	dlx, key, set := src.DeadLetter()
	found, err := b.FindDLQ(ctx, src.Queue, rabbit.Fallback{Exchange: dlx, RoutingKey: key, Set: set})
	if err != nil {
		_ = b.Close()
		if errors.Is(err, rabbit.ErrNoDLQ) {
			return nil, "", usageErr(fmt.Errorf("pipe %s: %w: name the dead-letter queue with --queue", spec.Name, err))
		}
		return nil, "", runtimeErr(fmt.Errorf("pipe %s: %w", spec.Name, err))
	}
	return b, found.Queue, nil
}

func inspectRabbitDLQ(ctx context.Context, spec config.Pipe, f dlqFlags, maxMsgs int, asJSON bool, stdout, stderr io.Writer) error {
	b, dlq, err := openRabbitDLQ(ctx, spec, f)
	if err != nil {
		return err
	}
	defer b.Close()
	counts, err := b.Counts(ctx, dlq)
	if err != nil {
		return runtimeErr(err)
	}
	unacked := "unacked unknown (the management API did not tell it)"
	if spec.Source.ManagementURL == rabbitmq.ManagementOff {
		unacked = "unacked unknown (management_url: off)"
	}
	if counts.UnackedKnown {
		unacked = fmt.Sprintf("%d unacked", counts.Unacked)
	}
	fmt.Fprintf(stderr, "dead-letter queue %s (vhost %s): %d ready, %s, %d consumers\n", dlq, b.Vhost(), counts.Ready, unacked, counts.Consumers)
	msgs, err := b.Peek(ctx, dlq, maxMsgs)
	out := json.NewEncoder(stdout)
	now := time.Now()
	for _, m := range msgs {
		var werr error
		if asJSON {
			werr = out.Encode(m.Record)
		} else {
			werr = m.View.WriteText(stdout, now)
		}
		if werr != nil {
			return runtimeErr(errors.Join(err, fmt.Errorf("writing records: %w", werr)))
		}
	}
	if err != nil {
		return runtimeErr(err)
	}
	return nil
}

func redriveRabbitDLQ(ctx context.Context, spec config.Pipe, f redriveFlags, pattern *filter.Pattern, stdout, stderr io.Writer) error {
	b, dlq, err := openRabbitDLQ(ctx, spec, f.dlqFlags)
	if err != nil {
		return err
	}
	defer b.Close()
	to := f.to
	if to == "" {
		to = spec.Source.Queue
	}
	if to == dlq {
		return usageErr(fmt.Errorf("the destination %s is the dead-letter queue itself: give another one with --to", to))
	}
	out := json.NewEncoder(stdout)
	var writeErr error
	bar := newDLQProgress(stderr)
	total := 0 // the bar's total: the ready count at the start
	if bar.tty {
		if counts, cerr := b.Counts(ctx, dlq); cerr == nil {
			total = redriveTotal(counts.Ready, f.max)
		}
	}
	var sum redrive.Summary
	sum, err = b.Redrive(ctx, rabbit.Options{
		From: dlq, To: to, Rate: f.rate, Max: f.max, Filter: pattern, DryRun: f.dryRun,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Report: func(e redrive.Entry) {
			if werr := out.Encode(e); werr != nil && writeErr == nil {
				writeErr = fmt.Errorf("writing the report: %w", werr)
			}
			sum.Count(e.Outcome)
			bar.show(sum.Handled(), total, summaryDetail(sum, f.dryRun), false)
		},
	})
	bar.clear()
	if f.dryRun {
		fmt.Fprintf(stderr, "dry run from %s to %s: %d would move, %d skipped by filter, %d failed; nothing moved\n", dlq, to, sum.WouldMove, sum.Skipped, sum.Failed)
	} else {
		fmt.Fprintf(stderr, "redrive from %s to %s: %d moved, %d skipped by filter, %d failed\n", dlq, to, sum.Moved, sum.Skipped, sum.Failed)
	}
	if err := errors.Join(err, writeErr); err != nil {
		return runtimeErr(err)
	}
	if sum.Failed > 0 {
		return runtimeErr(fmt.Errorf("%d message(s) could not be moved; they are still in %s (see the failed lines)", sum.Failed, dlq))
	}
	return nil
}
